package testvm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

func TestTestOutputs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // files, then directories
	}{
		{"none", []string{"-test.v=true", "-test.timeout=10m0s"}, nil},
		{"coverprofile absolute", []string{"-test.coverprofile=/tmp/b001/_cover_.out"}, []string{"/tmp/b001/_cover_.out"}},
		{"profiles in outputdir", []string{"-test.cpuprofile=cpu.out", "-test.outputdir=/work/pkg", "-test.trace=t.out"},
			[]string{"/work/pkg/cpu.out", "/work/pkg/t.out"}},
		{"relative to dir", []string{"-test.memprofile", "mem.out"}, []string{"/cwd/mem.out"}},
		{"gocoverdir", []string{"-test.gocoverdir=/tmp/b001/gocoverdir"}, []string{"/tmp/b001/gocoverdir"}},
		{"bool flag then value-looking arg", []string{"-test.v", "-test.cpuprofile=c"}, []string{"/cwd/c"}},
		{"program args ignored", []string{"-test.run=X", "-args", "-test.cpuprofile=x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, dirs := testOutputs(tt.args, "/cwd")
			if diff := cmp.Diff(tt.want, append(files, dirs...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseLdd(t *testing.T) {
	out := "/usr/bin/ibv_devinfo:\n\tlinux-vdso.so.1 (0x00007ffd)\n\tlibibverbs.so.1 => /lib/x86_64-linux-gnu/libibverbs.so.1 (0x00007f)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n" +
		"/usr/sbin/ip:\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n"
	got, err := parseLdd(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libibverbs.so.1", "/lib64/ld-linux-x86-64.so.2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseLdd("\tlibfoo.so.1 => not found\n"); !errors.Is(err, ErrMissingTool) {
		t.Errorf("missing library: got %v, want ErrMissingTool", err)
	}
}

// TestTreeHostPath checks that host symlinks on the way to a file are
// reproduced, parents come before children, and nothing is written twice.
func TestTreeHostPath(t *testing.T) {
	root := t.TempDir()
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustDo(os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755))
	mustDo(os.WriteFile(filepath.Join(root, "usr/lib/libx.so.1.2"), []byte("elf"), 0o644))
	mustDo(os.Symlink("libx.so.1.2", filepath.Join(root, "usr/lib/libx.so.1")))
	mustDo(os.Symlink("usr/lib", filepath.Join(root, "lib")))
	mustDo(os.MkdirAll(filepath.Join(root, "pkg/testdata/sub"), 0o755))
	mustDo(os.WriteFile(filepath.Join(root, "pkg/testdata/sub/f"), []byte("data"), 0o644))
	mustDo(os.WriteFile(filepath.Join(root, "pkg/other"), []byte("not copied"), 0o644))

	var buf bytes.Buffer
	tr := newTree(NewCPIOWriter(&buf), nil)
	mustDo(tr.hostPath(filepath.Join(root, "lib/libx.so.1")))
	mustDo(tr.hostPath(filepath.Join(root, "lib/libx.so.1"))) // again: no duplicates
	mustDo(tr.hostDirChain(filepath.Join(root, "pkg")))
	mustDo(tr.hostPath(filepath.Join(root, "pkg/testdata")))
	rel := strings.TrimPrefix(root, "/")
	mustDo(tr.copyFile(rel+"/lib/renamed", filepath.Join(root, "pkg/other"), 0o600)) // "lib" is a symlink in the archive
	mustDo(tr.cw.Close())

	entries, err := ReadCPIO(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	seen := map[string]bool{}
	for _, e := range entries {
		name := strings.TrimPrefix(strings.TrimPrefix(e.Name, rel), "/")
		if name == "" || strings.Count(rel, "/") >= strings.Count(e.Name, "/") && strings.HasPrefix(rel, e.Name) {
			continue // the temp directory's own parents
		}
		if seen[e.Name] {
			t.Errorf("%s written twice", e.Name)
		}
		seen[e.Name] = true
		if dir := filepath.Dir(e.Name); dir != "." && !seen[dir] && !strings.HasPrefix(rel, dir) {
			t.Errorf("%s comes before its directory", e.Name)
		}
		kind := "f"
		switch {
		case e.IsDir():
			kind = "d"
		case e.IsSymlink():
			kind = "l->" + string(e.Data)
		}
		got = append(got, name+" "+kind)
	}
	want := []string{
		"lib l->usr/lib",
		"usr d",
		"usr/lib d",
		"usr/lib/libx.so.1 l->libx.so.1.2",
		"usr/lib/libx.so.1.2 f",
		"pkg d",
		"pkg/testdata d",
		"pkg/testdata/sub d",
		"pkg/testdata/sub/f f",
		"usr/lib/renamed f",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// TestUncovered: a path asked back twice, or inside a directory asked
// back, is sent once.
func TestUncovered(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"/tmp/out", "/tmp/out/cpu.prof"}, []string{"/tmp/out"}},
		{[]string{"/tmp/out/cpu.prof", "/tmp/out"}, []string{"/tmp/out"}},
		{[]string{"/a/x", "/a/x", "/a/y"}, []string{"/a/x", "/a/y"}},
		{[]string{"/a/xy", "/a/x"}, []string{"/a/xy", "/a/x"}},
		{[]string{"/", "/etc/hosts"}, []string{"/"}},
	} {
		if diff := cmp.Diff(tc.want, uncovered(tc.in)); diff != "" {
			t.Errorf("uncovered(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	_, returns, err := buildSpec(Config{Kernel: "6.1", Program: "ibv_devinfo", Dir: "/w",
		Args: []string{"-test.cpuprofile", "/tmp/out/cpu.prof"}, Returns: []string{"/tmp/out/"}}, &baseManifest{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/tmp/out"}, returns); diff != "" {
		t.Errorf("returns (-want +got):\n%s", diff)
	}
}

func TestBuildSpecEnvironment(t *testing.T) {
	t.Setenv("GOVERBS_TRANSPORT", "write")
	t.Setenv("GOVERBS_VM", "stale")
	t.Setenv("GOTRACEBACK", "all")
	t.Setenv("UNRELATED", "x")
	spec, returns, err := buildSpec(Config{
		Kernel: "6.1", Program: "ibv_devinfo", Args: []string{"-v", "-test.coverprofile=c.out"},
		Dir: "/work/pkg", Env: []string{"EXTRA=1"}, Returns: []string{"rec"},
	}, &baseManifest{Modules: []string{"/m.ko"}})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; dup {
			t.Errorf("%s set twice", k)
		}
		env[k] = v
	}
	want := map[string]string{
		"PATH": GuestPATH, "HOME": "/root", "TMPDIR": "/tmp", vmenv.EnvKernelName: "6.1",
		"GOVERBS_TRANSPORT": "write", "GOTRACEBACK": "all", "EXTRA": "1",
	}
	for k := range env {
		if strings.HasPrefix(k, "GOVERBS_") && want[k] == "" && k != vmenv.EnvKernelName {
			want[k] = env[k] // the caller's own GOVERBS_* (e.g. GOVERBS_VM_CACHE)
		}
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/work/pkg/rec", "/work/pkg/c.out"}, returns); diff != "" {
		t.Errorf("returns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ibv_devinfo", "-v", "-test.coverprofile=c.out"}, spec.Args); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
}

func TestBuildSpecBadProgram(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, prog := range map[string]string{
		"empty":          "",
		"missing":        "./nope",
		"not executable": "./data",
		"directory":      dir + "/",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := buildSpec(Config{Kernel: "6.1", Program: prog, Dir: dir}, &baseManifest{})
			if !errors.Is(err, ErrBadProgram) {
				t.Fatalf("got %v, want ErrBadProgram", err)
			}
		})
	}
}

// The tests below boot the VM from the host. They take a few seconds each
// and need QEMU and the kernel packages, so they run only when asked:
// GOVERBS_VM_SELFTEST=1 (make vmselftest). GOVERBS_VM_SELFTEST_KERNELS
// picks the kernels (default: all).

func selftestKernels(t *testing.T) []string {
	t.Helper()
	if os.Getenv("GOVERBS_VM_SELFTEST") == "" {
		t.Skip("boots the test VM; set GOVERBS_VM_SELFTEST=1 (make vmselftest)")
	}
	if vmenv.InVM() {
		t.Skip("already inside the test VM")
	}
	if k := os.Getenv("GOVERBS_VM_SELFTEST_KERNELS"); k != "" {
		return strings.Fields(k)
	}
	return KernelNames
}

func runVM(t *testing.T, cfg Config) (stdout, stderr string, res *Result, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errb
	start := time.Now()
	res, err = Run(context.Background(), cfg)
	if res != nil {
		t.Logf("kernel %s: prepare %v, boot %v, setup %v, run %v, power-off %v, wall %v", cfg.Kernel,
			res.Prepare.Round(time.Millisecond), res.Boot.Round(time.Millisecond), res.Setup.Round(time.Millisecond),
			res.Run.Round(time.Millisecond), res.Shutdown.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	return out.String(), errb.String(), res, err
}

// TestVMByteExact checks that stdout and stderr come back unchanged and
// apart, with the exit status, and that files come back.
func TestVMByteExact(t *testing.T) {
	for _, k := range selftestKernels(t) {
		t.Run(k, func(t *testing.T) {
			outFile := filepath.Join(t.TempDir(), "sub", "out.bin")
			script := `printf 'a\r\nb\n\000\377\033[0m'; printf 'err\r\n' >&2; printf "$GOVERBS_VM|$GOVERBS_SELFTEST_MARK" >&2; ` +
				`mkdir -p ` + filepath.Dir(outFile) + `; printf 'file\000' > ` + outFile + `; exit 3`
			t.Setenv("GOVERBS_SELFTEST_MARK", "passed through")
			stdout, stderr, res, err := runVM(t, Config{Kernel: k, Program: "sh", Args: []string{"-c", script}, Returns: []string{outFile}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("a\r\nb\n\x00\xff\x1b[0m", stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff("err\r\n"+k+"|passed through", stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if res.ExitCode != 3 {
				t.Errorf("exit code %d, want 3", res.ExitCode)
			}
			got, err := os.ReadFile(outFile)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("file\x00", string(got)); diff != "" {
				t.Errorf("returned file (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVMReferenceTools runs rdma-core's ping-pong between rxe0 and rxe1 and
// perftest on one device.
func TestVMReferenceTools(t *testing.T) {
	for _, k := range selftestKernels(t) {
		t.Run(k, func(t *testing.T) {
			// The clients retry: on a loaded host the server may take a
			// while to listen.
			script := `client() { for i in 1 2 3 4 5 6 7 8 9 10; do "$@" && return 0; sleep 1; done; return 1; }; ` +
				`ibv_rc_pingpong -d rxe0 -g 1 -n 50 >/tmp/srv 2>&1 & ` +
				`client ibv_rc_pingpong -d rxe1 -g 1 -n 50 10.99.0.1 || exit 1; wait $! || { cat /tmp/srv; exit 2; }; ` +
				`ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 >/tmp/bw 2>&1 & ` +
				`client ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 10.99.0.1 || exit 3; wait $! || { cat /tmp/bw; exit 4; }`
			stdout, stderr, res, err := runVM(t, Config{Kernel: k, Program: "sh", Args: []string{"-c", script}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, stdout, stderr)
			}
			for _, want := range []string{"50 iters in", "GID ::ffff:10.99.0.2", "65536      200"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
		})
	}
}

// TestVMTimeout checks that a hung program ends the run with ErrTimeout.
func TestVMTimeout(t *testing.T) {
	k := selftestKernels(t)[0]
	_, _, _, err := runVM(t, Config{Kernel: k, Program: "sleep", Args: []string{"1000"}, Timeout: 12 * time.Second})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
}

func TestTestdataDirs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"testdata", "a/testdata/deep/testdata", "b/c/testdata", ".hidden/testdata", "_skip/testdata", "vendor/x/testdata", "sub/testdata", "pkg"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"go.mod", "sub/go.mod"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("module x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := testdataDirs(filepath.Join(root, "pkg"), io.Discard)
	want := []string{filepath.Join(root, "a/testdata"), filepath.Join(root, "b/c/testdata"), filepath.Join(root, "testdata")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
