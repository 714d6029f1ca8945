//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package mlx5

// bigEndianHost says whether the CPU stores words big endian, as the
// HCA's structures are.
const bigEndianHost = true
