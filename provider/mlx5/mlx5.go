// Package mlx5 is the goverbs provider for NVIDIA ConnectX adapters (the
// kernel's mlx5_ib driver).
//
// Status: the context set-up is implemented and its driver data is checked
// against the mlx5_ib module BTF; the data path is not written yet, and
// nothing here has run on mlx5 hardware.
package mlx5

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

func init() { provider.Register(mlx5Provider{}) }

type mlx5Provider struct{}

func (mlx5Provider) Name() string            { return "mlx5" }
func (mlx5Provider) DriverID() abi.DriverID  { return abi.DriverMLX5 }
func (mlx5Provider) ABIVersions() (int, int) { return abi.MLX5ABIVersion, abi.MLX5ABIVersion }
func (mlx5Provider) MatchName(ibdev string) bool {
	return strings.HasPrefix(ibdev, "mlx5_")
}

func (mlx5Provider) NewContext(provider.Device) (provider.Context, error) {
	c := &context{}
	// The request libmlx5 sends by default: 16 bfregs, 4 of them low
	// latency, CQE version 1, 4K and dynamic UARs.
	c.req = abi.MLX5AllocUcontextReqV2{
		TotalNumBfregs:      abi.MLX5DefaultTotalUUARs,
		NumLowLatencyBfregs: max(4, abi.MLX5DefaultTotalUUARs-abi.MLX5MedBfregsThreshold),
		MaxCQEVersion:       abi.MLX5CQEVersionV1,
		LibCaps:             abi.MLX5LibCap4KUAR | abi.MLX5LibCapDynUAR,
	}
	return c, nil
}

type context struct {
	req  abi.MLX5AllocUcontextReqV2
	resp abi.MLX5AllocUcontextResp
}

func (c *context) GetContextData() (in, out []byte) {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c.req)), unsafe.Sizeof(c.req)),
		unsafe.Slice((*byte)(unsafe.Pointer(&c.resp)), unsafe.Sizeof(c.resp))
}

func (c *context) Started(*transport.Conn) error { return nil }
func (c *context) Close() error                  { return nil }

// FirmwareVersion formats fw_ver as libmlx5 does: major.minor.%04d.
func (*context) FirmwareVersion(raw uint64) string {
	return fmt.Sprintf("%d.%d.%04d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
}
