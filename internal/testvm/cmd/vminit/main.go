// Command vminit is the /init of the goverbs test VM. It runs as PID 1 in a
// Debian kernel booted by internal/testvm: it mounts the pseudo filesystems,
// loads the RDMA modules, builds the fixed rxe topology (rxe0 on va, rxe1 on
// vb, a veth pair), runs the one program named in the run spec, sends its
// output, files and exit status to the host over the framed serial channel
// (see internal/testvm/vmproto) and powers the VM off.
//
// It must be linked statically (CGO_ENABLED=0): the initramfs has no libc
// for it to wait on before it has set anything up.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproto"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "vminit: this is the init of the goverbs test VM; it only runs as PID 1 inside it")
		os.Exit(2)
	}
	// Returning from PID 1 panics the kernel; every path ends in powerOff.
	defer powerOff()

	start := time.Now()
	if err := mount("devtmpfs", "/dev", "devtmpfs", 0, ""); err != nil {
		consolef("vminit: %v", err)
		return
	}
	channel, err := openChannel(vmproto.ChannelDevice)
	if err != nil {
		consolef("vminit: %v", err)
		return
	}
	g := &guest{fw: vmproto.NewWriter(channel)}
	if err := g.fw.WriteFrame(vmproto.KindHello, []byte(vmproto.Hello)); err != nil {
		consolef("vminit: %v", err)
		return
	}
	exit := g.run(start)
	b, _ := json.Marshal(exit)
	if err := g.fw.WriteFrame(vmproto.KindExit, b); err != nil {
		consolef("vminit: reporting the exit status: %v", err)
	}
	// The UART may still hold the tail of the stream; power-off would cut it.
	if err := unix.IoctlSetInt(int(channel.Fd()), unix.TCSBRK, 1); err != nil {
		consolef("vminit: draining %s: %v", vmproto.ChannelDevice, err)
	}
}

type guest struct {
	fw *vmproto.Writer
}

// logf writes a line to the kernel console (the host's log file) and to the
// channel, where the host shows it on request or when setup fails.
func (g *guest) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	consolef("vminit: %s", line)
	_ = g.fw.WriteFrame(vmproto.KindLog, []byte(line))
}

func (g *guest) run(start time.Time) vmproto.Exit {
	spec, err := readSpec()
	if err != nil {
		return vmproto.Exit{SetupError: err.Error()}
	}
	release, err := setup(g, spec)
	if err != nil {
		return vmproto.Exit{SetupError: err.Error()}
	}
	g.logf("setup done in %v (kernel %s)", time.Since(start).Round(time.Millisecond), release)
	_ = g.fw.WriteFrame(vmproto.KindReady, []byte(release))
	exit := g.runProgram(spec, release)
	g.sendReturns(spec.Return)
	return exit
}

func readSpec() (*vmproto.Spec, error) {
	b, err := os.ReadFile(vmproto.SpecPath)
	if err != nil {
		return nil, fmt.Errorf("read run spec: %w", err)
	}
	var spec vmproto.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("decode run spec %s: %w", vmproto.SpecPath, err)
	}
	if len(spec.Args) == 0 || spec.Path == "" {
		return nil, fmt.Errorf("run spec %s names no program", vmproto.SpecPath)
	}
	return &spec, nil
}

// setup prepares the VM and returns the kernel release.
func setup(g *guest, spec *vmproto.Spec) (string, error) {
	if err := mountAll(); err != nil {
		return "", err
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	for _, m := range spec.Modules {
		if err := loadModule(m); err != nil {
			return "", err
		}
	}
	env := spec.Env
	// exec.Command looks names up in this process's PATH, which the kernel
	// leaves unset for init.
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			os.Setenv("PATH", v)
		}
	}
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		// Fixed MACs make the rxe node GUIDs and link-local GIDs the same
		// on every boot, so outputs can be compared with recorded ones.
		{"ip", "link", "add", vmenv.NetdevA, "address", vmenv.MACA, "type", "veth", "peer", "name", vmenv.NetdevB, "address", vmenv.MACB},
		{"ip", "addr", "add", vmenv.AddrA + "/24", "dev", vmenv.NetdevA},
		{"ip", "addr", "add", vmenv.AddrB + "/24", "dev", vmenv.NetdevB},
		{"ip", "link", "set", vmenv.NetdevA, "up"},
		{"ip", "link", "set", vmenv.NetdevB, "up"},
		{"rdma", "link", "add", vmenv.RXE0, "type", "rxe", "netdev", vmenv.NetdevA},
		{"rdma", "link", "add", vmenv.RXE1, "type", "rxe", "netdev", vmenv.NetdevB},
	}
	for i, argv := range steps {
		if err := runTool(env, argv); err != nil {
			return "", err
		}
		if i == 1 { // the veth pair exists
			if err := allowLocalSources(); err != nil {
				return "", err
			}
		}
	}
	timeout := time.Duration(spec.SetupTimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	for _, dev := range []string{vmenv.RXE0, vmenv.RXE1} {
		if err := waitPort(dev, timeout); err != nil {
			return "", err
		}
	}
	return release, nil
}

// allowLocalSources lets traffic between rxe0 and rxe1 cross the veth
// pair although both addresses are local: the kernel resolves the peer's
// MAC with ARP on va (the GID's netdev is the route's oif), and vb drops an
// ARP request, or a packet, whose source address is one of its own unless
// accept_local is set. rp_filter off keeps the same packets from failing
// the reverse-path check.
func allowLocalSources() error {
	for _, dev := range []string{"all", vmenv.NetdevA, vmenv.NetdevB} {
		for knob, val := range map[string]string{"accept_local": "1", "rp_filter": "0"} {
			p := filepath.Join("/proc/sys/net/ipv4/conf", dev, knob)
			if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
				return fmt.Errorf("sysctl: %w", err)
			}
		}
	}
	return nil
}

type mountPoint struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

func mountAll() error {
	if err := stageTmp(); err != nil {
		return err
	}
	for _, m := range []mountPoint{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "mode=0620,ptmxmode=0666"},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	} {
		if err := mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
			return err
		}
	}
	return nil
}

// stageTmp mounts a tmpfs on /tmp. The initramfs may already hold files
// under /tmp (go test puts its test binaries there), so those are moved
// aside first and bind-mounted back into the fresh tmpfs.
func stageTmp() error {
	const staged = "/.goverbs-tmp"
	entries, err := os.ReadDir("/tmp")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read /tmp: %w", err)
	}
	if len(entries) > 0 {
		if err := os.Rename("/tmp", staged); err != nil {
			return fmt.Errorf("move initramfs /tmp aside: %w", err)
		}
	}
	if err := mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return err
	}
	for _, e := range entries {
		src, dst := filepath.Join(staged, e.Name()), filepath.Join("/tmp", e.Name())
		if e.IsDir() {
			err = os.Mkdir(dst, 0o755)
		} else {
			err = os.WriteFile(dst, nil, 0o644)
		}
		if err != nil {
			return fmt.Errorf("bind target for %s: %w", src, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, dst, err)
		}
	}
	return nil
}

func mount(source, target, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", target, err)
	}
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, target, err)
	}
	return nil
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w (see the kernel log)", filepath.Base(path), err)
	}
	return nil
}

func runTool(env, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitPort waits until port 1 of dev is ACTIVE and its GID index 1 (the
// RoCEv2 IPv4 one, filled asynchronously by the kernel) is set.
func waitPort(dev string, timeout time.Duration) error {
	port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	deadline := time.Now().Add(timeout)
	var state, gid string
	for {
		state = readTrim(filepath.Join(port, "state"))
		gid = readTrim(filepath.Join(port, "gids", fmt.Sprint(vmenv.GIDIndex)))
		if strings.Contains(state, "ACTIVE") && gid != "" && strings.Trim(gid, "0:") != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s port 1 not usable after %v: state %q, gid[%d] %q", dev, timeout, state, vmenv.GIDIndex, gid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

func (g *guest) runProgram(spec *vmproto.Spec, release string) vmproto.Exit {
	env := append(append([]string(nil), spec.Env...), vmenv.EnvKernelRelease+"="+release)
	for _, d := range spec.MakeDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return vmproto.Exit{SetupError: fmt.Sprintf("create output directory: %v", err)}
		}
	}
	path := spec.Path
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return vmproto.Exit{Code: 127, RunError: err.Error()}
		}
		path = p
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   spec.Args,
		Env:    env,
		Dir:    spec.Dir,
		Stdout: g.fw.StreamWriter(vmproto.KindStdout),
		Stderr: g.fw.StreamWriter(vmproto.KindStderr),
		// Children the program left running may keep its stdout open; past
		// this delay after its exit the init stops waiting for them.
		WaitDelay: time.Duration(spec.DrainMillis) * time.Millisecond,
	}
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
	case errors.As(err, &exitErr):
	default:
		return vmproto.Exit{Code: 127, RunError: err.Error()}
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		g.logf("%s exited but its output stayed open for %v; later output is lost", spec.Args[0], cmd.WaitDelay)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return vmproto.Exit{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
	}
	return vmproto.Exit{Code: cmd.ProcessState.ExitCode()}
}

// sendReturns sends the files the host asked back for; missing ones are
// skipped (the program may legitimately not have written them).
func (g *guest) sendReturns(paths []string) {
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			return g.sendFile(path)
		})
		if err != nil {
			g.logf("sending %s back: %v", root, err)
		}
	}
}

func (g *guest) sendFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, vmproto.FileChunkSize)
	for first := true; ; first = false {
		n, err := io.ReadFull(f, buf)
		if n > 0 || first {
			payload, perr := vmproto.EncodeFileChunk(path, buf[:n])
			if perr != nil {
				return perr
			}
			if werr := g.fw.WriteFrame(vmproto.KindFile, payload); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// openChannel opens the serial port of the frame channel in raw mode, so
// that every byte reaches the host unchanged (no \n to \r\n, no flow
// control characters).
func openChannel(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open channel %s: %w", path, err)
	}
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("get termios of %s: %w", path, err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CRTSCTS | unix.CBAUD
	t.Cflag |= unix.CS8 | unix.CLOCAL | unix.CREAD | unix.B115200
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set raw mode on %s: %w", path, err)
	}
	// Writes must block when the UART is busy rather than fail with EAGAIN.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make %s blocking: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// consolef writes to the kernel console, which the host keeps as a log.
func consolef(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func powerOff() {
	unix.Sync()
	err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Still here: exiting PID 1 panics the kernel, and panic=-1 with QEMU's
	// -no-reboot ends the VM all the same.
	consolef("vminit: power off: %v", err)
	os.Exit(1)
}
