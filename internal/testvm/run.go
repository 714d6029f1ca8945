package testvm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproto"
)

// Add copies a host file or directory into the guest.
type Add struct {
	Host  string // host path
	Guest string // absolute guest path; the host path if empty
}

// Config describes one VM run of one program.
type Config struct {
	Kernel string // kernel name, e.g. "6.12"

	// Program is a host path (it contains a "/"; it is copied into the
	// guest at the same absolute path, with its shared libraries) or the
	// name of a command already in the guest (ibv_devinfo, sh).
	Program string
	Args    []string // arguments after the program name
	Env     []string // extra KEY=VALUE for the program
	// Dir is the working directory, the same path in host and guest; the
	// host's current directory if empty. The testdata directories of its Go
	// module are copied along (see testdataDirs).
	Dir string
	// Adds are extra host files or directories to copy into the guest.
	Adds []Add
	// Returns are guest files or directories to bring back after the run,
	// written to the same path on the host (missing ones are skipped).
	Returns []string

	Stdout, Stderr io.Writer // the program's output, byte for byte
	// Console, if set, gets the kernel console as it arrives (the -v of
	// vmexec); it is always written to a log file as well.
	Console io.Writer
	// Log, if set, gets the harness's progress lines and the guest init's.
	Log io.Writer

	Timeout      time.Duration // whole run, boot included; 15 minutes if zero
	SetupTimeout time.Duration // rxe bring-up in the guest; 60 s if zero
	MemoryMiB    int           // 1024 if zero
	CPUs         int           // 2 if zero
	Init         string        // the vminit binary; found or built if empty
	KeepLog      bool          // keep the console log even on success
}

// Result is the outcome of a run that reached the program.
type Result struct {
	ExitCode   int    // the program's exit status (128+signal if killed)
	Signal     string // the signal that killed it, if one did
	Kernel     *Kernel
	ConsoleLog string // path of the kernel console log, if kept

	Prepare  time.Duration // kernel fetch and initramfs build on the host
	Boot     time.Duration // QEMU start until the guest init speaks
	Setup    time.Duration // modules, network, rxe
	Run      time.Duration // the program
	Shutdown time.Duration // exit report until QEMU is gone
}

// Errors of a run. A failed run's error wraps one of these; the console log
// is kept and its path is in the error text.
var (
	ErrTimeout     = errors.New("test VM timed out")
	ErrInterrupted = errors.New("test VM interrupted")
	ErrSetup       = errors.New("test VM setup failed")
	ErrGuestLost   = errors.New("test VM ended without reporting the program's exit status")
	ErrBadProgram  = errors.New("program cannot run in the test VM")
)

// qbootROM is QEMU's minimal firmware (Debian's qemu-system-data).
const qbootROM = "/usr/share/qemu/qboot.rom"

// errNoBoot marks a guest that ended before its init started.
var errNoBoot = errors.New("kernel did not boot")

// DefaultTimeout bounds a whole run unless Config.Timeout says otherwise.
const DefaultTimeout = 15 * time.Minute

// testdataLimit bounds the testdata copied along with a program; larger
// trees must be added explicitly.
const testdataLimit = 32 << 20

// splat matches kernel console lines that mean something went wrong in the
// kernel even though the program may have passed.
var splat = regexp.MustCompile(`(?m)(WARNING:|BUG:|Oops|Call Trace:|general protection fault|Kernel panic)`)

// Run boots the kernel with the program and returns its exit status. A
// non-nil error means the harness, not the program, failed.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		cfg.Dir = wd
	}
	if !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("%w: working directory %q is not absolute", ErrBadProgram, cfg.Dir)
	}

	start := time.Now()
	k, err := FetchKernel(ctx, cfg.Kernel)
	if err != nil {
		return nil, err
	}
	base, manifest, err := ensureBase(ctx, k)
	if err != nil {
		return nil, err
	}
	initBin := cfg.Init
	if initBin == "" {
		if initBin, err = FindInit(ctx); err != nil {
			return nil, err
		}
	}
	runDir, err := os.MkdirTemp("", "goverbs-vm-")
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	defer os.RemoveAll(runDir)

	spec, returns, err := buildSpec(cfg, manifest)
	if err != nil {
		return nil, err
	}
	initrd := filepath.Join(runDir, "initrd.cpio")
	if err := writeInitrd(ctx, initrd, base, manifest, initBin, spec, cfg); err != nil {
		return nil, err
	}
	res := &Result{Kernel: k, Prepare: time.Since(start)}
	fmt.Fprintf(cfg.Log, "vmexec: kernel %s = %s %s (%s); prepared in %v\n", k.Name, k.Package, k.PackageVersion, k.Release, res.Prepare.Round(time.Millisecond))

	consoleLog := filepath.Join(runDir, "console.log")
	runErr := boot(ctx, cfg, k, runDir, initrd, consoleLog, returns, res)
	if errors.Is(runErr, errNoBoot) && ctx.Err() == nil {
		// The guest died before its init spoke: nothing of the program ran,
		// so one more try is safe. TCG on a loaded host makes early boot
		// fragile (timer checks, APIC bring-up).
		kept, _ := keepLog(consoleLog)
		fmt.Fprintf(cfg.Log, "vmexec: %v (console log %s); booting again\n", runErr, kept)
		runErr = boot(ctx, cfg, k, runDir, initrd, consoleLog, returns, res)
	}
	logData, _ := os.ReadFile(consoleLog)
	problem := runErr != nil && !errors.Is(runErr, ErrBadProgram) || res.ExitCode != 0 && splat.Match(logData)
	if problem || cfg.KeepLog {
		kept, err := keepLog(consoleLog)
		if err == nil {
			res.ConsoleLog = kept
		}
	}
	if runErr != nil {
		if res.ConsoleLog != "" {
			runErr = fmt.Errorf("%w (kernel console log: %s)", runErr, res.ConsoleLog)
		}
		return res, runErr
	}
	return res, nil
}

// keepLog moves the console log out of the run directory, which is removed.
func keepLog(p string) (string, error) {
	f, err := os.CreateTemp("", "goverbs-vm-console-*.log")
	if err != nil {
		return "", err
	}
	defer f.Close()
	src, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer src.Close()
	_, err = io.Copy(f, src)
	return f.Name(), err
}

// guestEnvPassthrough lists host variables, besides GOVERBS_*, that change
// how a Go program behaves and so travel into the guest.
var guestEnvPassthrough = []string{"GODEBUG", "GOTRACEBACK", "GOGC", "GOMEMLIMIT", "GOMAXPROCS"}

func buildSpec(cfg Config, manifest *baseManifest) (*vmproto.Spec, []string, error) {
	if cfg.Program == "" {
		return nil, nil, fmt.Errorf("%w: no program given", ErrBadProgram)
	}
	prog := cfg.Program
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(cfg.Dir, prog)
		}
		fi, err := os.Stat(prog)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrBadProgram, err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return nil, nil, fmt.Errorf("%w: %s is not an executable file", ErrBadProgram, prog)
		}
	}
	env := []string{
		"PATH=" + GuestPATH,
		"HOME=/root",
		"TMPDIR=/tmp",
		vmenv.EnvKernelName + "=" + cfg.Kernel,
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GOVERBS_") && k != vmenv.EnvKernelName && k != vmenv.EnvKernelRelease {
			env = append(env, kv)
			continue
		}
		for _, p := range guestEnvPassthrough {
			if k == p {
				env = append(env, kv)
			}
		}
	}
	env = append(env, cfg.Env...)

	returns := append([]string(nil), cfg.Returns...)
	testFiles, testDirs := testOutputs(cfg.Args, cfg.Dir)
	returns = append(returns, testFiles...)
	returns = append(returns, testDirs...)
	mkdirs := testDirs // the test binary checks they exist before it writes
	for i, r := range returns {
		if !filepath.IsAbs(r) {
			returns[i] = filepath.Join(cfg.Dir, r)
		}
		returns[i] = filepath.Clean(returns[i])
		mkdirs = append(mkdirs, filepath.Dir(returns[i]))
	}
	returns = uncovered(returns)
	spec := &vmproto.Spec{
		KernelName:         cfg.Kernel,
		Modules:            manifest.Modules,
		Path:               prog,
		Args:               append([]string{prog}, cfg.Args...),
		Env:                env,
		Dir:                cfg.Dir,
		MakeDirs:           mkdirs,
		Return:             returns,
		SetupTimeoutMillis: int(cfg.SetupTimeout / time.Millisecond),
	}
	if !strings.Contains(cfg.Program, "/") {
		spec.Args[0] = cfg.Program
	}
	return spec, returns, nil
}

// testOutputs finds the files and directories a Go test binary writes that
// go test expects on the host afterwards (coverage, profiles), from its
// -test.* flags.
func testOutputs(args []string, dir string) (files, dirs []string) {
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-args" {
			break
		}
		if !strings.HasPrefix(a, "-test.") && !strings.HasPrefix(a, "--test.") {
			continue
		}
		name, val, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok && i+1 < len(args) {
			switch name {
			case "test.v", "test.short", "test.failfast", "test.benchmem", "test.fullpath", "test.paniconexit0":
				continue // boolean flags take no separate value
			}
			i++
			val = args[i]
		}
		flags[name] = val
	}
	outDir := dir
	if d := flags["test.outputdir"]; d != "" {
		outDir = d
	}
	for _, f := range []string{"test.coverprofile", "test.cpuprofile", "test.memprofile", "test.blockprofile", "test.mutexprofile", "test.trace"} {
		if p := flags[f]; p != "" {
			if !filepath.IsAbs(p) {
				p = filepath.Join(outDir, p)
			}
			files = append(files, p)
		}
	}
	if d := flags["test.gocoverdir"]; d != "" {
		dirs = append(dirs, d)
	}
	return files, dirs
}

func writeInitrd(ctx context.Context, dst, base string, manifest *baseManifest, initBin string, spec *vmproto.Spec, cfg Config) error {
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer out.Close()
	in, err := os.Open(base)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	_, err = io.Copy(out, in)
	in.Close()
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}

	t := newTree(NewCPIOWriter(out), manifest.Entries)
	if err := t.copyFile("init", initBin, 0o755); err != nil {
		return err
	}
	specJSON, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := t.bytes(strings.TrimPrefix(vmproto.SpecPath, "/"), 0o644, specJSON); err != nil {
		return err
	}
	// The working directory itself, not its contents; then its testdata.
	if err := t.hostDirChain(cfg.Dir); err != nil {
		return err
	}
	for _, td := range testdataDirs(cfg.Dir, cfg.Log) {
		if err := t.hostPath(td); err != nil {
			return err
		}
	}
	if strings.Contains(spec.Path, "/") {
		if err := t.hostPath(spec.Path); err != nil {
			return err
		}
		libs, err := guestLibs(ctx, spec.Path)
		if err != nil {
			return err
		}
		for _, l := range libs {
			if err := t.hostPath(l); err != nil {
				return err
			}
		}
	}
	for _, a := range cfg.Adds {
		if err := addToTree(ctx, t, a); err != nil {
			return err
		}
	}
	if err := t.cw.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return nil
}

func addToTree(ctx context.Context, t *tree, a Add) error {
	host, err := filepath.Abs(a.Host)
	if err != nil {
		return fmt.Errorf("add %s: %w", a.Host, err)
	}
	guest := a.Guest
	if guest == "" {
		guest = host
	}
	if !path.IsAbs(guest) {
		return fmt.Errorf("%w: guest path %q of %s is not absolute", ErrBadProgram, guest, a.Host)
	}
	fi, err := os.Stat(host)
	if err != nil {
		return fmt.Errorf("%w: add: %w", ErrBadProgram, err)
	}
	name := strings.TrimPrefix(path.Clean(guest), "/")
	if fi.IsDir() {
		if err := t.mkdirAll(path.Dir(name)); err != nil {
			return err
		}
		return t.hostDir(host, t.resolve(name))
	}
	if err := t.copyFile(name, host, 0); err != nil {
		return err
	}
	libs, err := guestLibs(ctx, host)
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := t.hostPath(l); err != nil {
			return err
		}
	}
	return nil
}

// testdataDirs lists the testdata directories to copy along with a program
// run in dir: inside a Go module every testdata directory of the module
// (tests open ../testdata and ../../sysfs/testdata alike), otherwise those
// of dir and its parents. Trees past testdataLimit in all are left out;
// -add them explicitly.
func testdataDirs(dir string, log io.Writer) []string {
	var candidates []string
	if root := moduleRoot(dir); root != "" {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			name := d.Name()
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "vendor") {
				return fs.SkipDir // what the go tool ignores too
			}
			if p != root && fileExists(filepath.Join(p, "go.mod")) {
				return fs.SkipDir // another module
			}
			if name == "testdata" {
				candidates = append(candidates, p)
				return fs.SkipDir
			}
			return nil
		})
	} else {
		for d := dir; ; d = filepath.Dir(d) {
			if td := filepath.Join(d, "testdata"); fileExists(td) {
				candidates = append(candidates, td)
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	var dirs []string
	var total int64
	for _, td := range candidates {
		n, err := dirSize(td, testdataLimit)
		if err != nil || total+n > testdataLimit {
			fmt.Fprintf(log, "vmexec: not copying %s into the guest (%d bytes, limit %d in all)\n", td, n, testdataLimit)
			continue
		}
		total += n
		dirs = append(dirs, td)
	}
	return dirs
}

// uncovered drops the paths that another in the list names already, the
// same path or one inside a directory in it (-get /tmp/out with
// -test.cpuprofile /tmp/out/cpu.prof): the guest sends back each path it
// is given, and the host appends what arrives for a file, so a file
// asked for twice came back twice, concatenated. The order is kept.
func uncovered(paths []string) []string {
	var out []string
	for i, p := range paths {
		covered := false
		for j, q := range paths {
			if i != j && (p == q && j < i || strings.HasPrefix(p, strings.TrimSuffix(q, "/")+"/")) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// moduleRoot returns the directory of the go.mod enclosing dir, or "".
func moduleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if fileExists(filepath.Join(d, "go.mod")) {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// FindInit returns the guest init binary: $GOVERBS_VM_INIT, else vminit
// next to the running executable (make vmexec puts it in bin/), else one
// built now from this module's source with CGO_ENABLED=0.
func FindInit(ctx context.Context) (string, error) {
	if p := os.Getenv("GOVERBS_VM_INIT"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "vminit")
		if ok, err := isStaticExecutable(p); err == nil && ok {
			return p, nil
		}
	}
	return BuildInit(ctx)
}

func isStaticExecutable(p string) (bool, error) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false, err
	}
	dyn, err := isDynamicELF(p)
	return !dyn, err
}

// BuildInit builds the guest init from the source tree this package was
// compiled from into the cache and returns its path.
func BuildInit(ctx context.Context) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("%w: cannot locate the vminit source; set GOVERBS_VM_INIT", ErrMissingTool)
	}
	src := filepath.Join(filepath.Dir(self), "cmd", "vminit")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("%w: vminit source: %w; build it (make vmexec) or set GOVERBS_VM_INIT", ErrMissingTool, err)
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("cache: %w", err)
	}
	out, err := os.CreateTemp(cache, "vminit-*")
	if err != nil {
		return "", fmt.Errorf("build vminit: %w", err)
	}
	out.Close()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out.Name(), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("build vminit: %w: %s", err, msg)
	}
	final := filepath.Join(cache, "vminit")
	if err := os.Rename(out.Name(), final); err != nil {
		return "", fmt.Errorf("build vminit: %w", err)
	}
	return final, nil
}

// phase names the part of a run the VM was in, for timeout messages.
type phase int

const (
	phaseBoot phase = iota
	phaseSetup
	phaseRun
	phaseShutdown
)

func (p phase) String() string {
	return [...]string{"booting the kernel", "setting up rxe", "running the program", "powering off"}[p]
}

func boot(ctx context.Context, cfg Config, k *Kernel, runDir, initrd, consoleLog string, returns []string, res *Result) error {
	mem, cpus := cfg.MemoryMiB, cfg.CPUs
	if mem <= 0 {
		mem = 1024
	}
	if cpus <= 0 {
		cpus = 2
	}
	consoleSock := filepath.Join(runDir, "console.sock")
	channelSock := filepath.Join(runDir, "channel.sock")
	os.Remove(consoleSock) // left by an earlier attempt
	os.Remove(channelSock)
	consoleLn, err := net.Listen("unix", consoleSock)
	if err != nil {
		return fmt.Errorf("console socket: %w", err)
	}
	defer consoleLn.Close()
	channelLn, err := net.Listen("unix", channelSock)
	if err != nil {
		return fmt.Errorf("channel socket: %w", err)
	}
	defer channelLn.Close()
	logFile, err := os.Create(consoleLog)
	if err != nil {
		return fmt.Errorf("console log: %w", err)
	}
	defer logFile.Close()
	qemuLog, err := os.Create(filepath.Join(runDir, "qemu.log"))
	if err != nil {
		return fmt.Errorf("qemu log: %w", err)
	}
	defer qemuLog.Close()

	kernelImage := k.Vmlinux
	if kernelImage == "" {
		kernelImage = k.Vmlinuz
	}
	var firmware []string
	if _, err := os.Stat(qbootROM); err == nil && k.Vmlinux != "" {
		// qboot starts a PVH kernel and loads the initramfs in about a
		// second less than SeaBIOS under TCG.
		firmware = []string{"-bios", qbootROM}
	}
	// Two UARTs: ttyS0 the kernel console, ttyS1 the framed channel.
	// no_timer_check: under TCG on a busy host the IO-APIC timer test at
	// boot can miss its interrupt and panic ("IO-APIC + timer doesn't
	// work!"); the timer itself is fine. cryptomgr.notests: Debian's
	// kernels test each crypto algorithm as it registers, which the VM
	// has no use for; once, in a CI run (6.1, 2026-11-29), a test thread
	// spun there for good ("soft lockup ... [cryptomgr_test]") and the
	// boot never ended. tsc=reliable: the clocksource watchdog, which on
	// a busy host sees the emulated TSC skew and switches clocksource,
	// flips static keys by live code patching (int3), which TCG got
	// wrong once in a CI run (6.12, 2026-11-29: "Oops: int3" in
	// sched_clock_cpu from clocksource_watchdog_work, then a panic); a
	// switch mid-run would also change the clock that measurements in the
	// VM read.
	//
	// TCG, not KVM: the project's build machines have no VMX or SVM, and
	// where they expose /dev/kvm it is PVM (nested_pvm on the host's
	// command line), which runs only guest kernels built for it. Debian's
	// kernels under -accel kvm stop after the firmware with -cpu host,-
	// arch-capabilities or qemu64 (nothing on the console in 30 s), and
	// -cpu host fails at once setting MSR 0x10a (checked 2026-11-29).
	appendLine := "console=ttyS0 panic=-1 quiet loglevel=4 8250.nr_uarts=2 no_timer_check cryptomgr.notests tsc=reliable"
	args := append(firmware,
		"-accel", "tcg", "-cpu", "max",
		"-m", fmt.Sprint(mem), "-smp", fmt.Sprint(cpus),
		"-nographic", "-no-reboot", "-monitor", "none", "-vga", "none", "-nic", "none",
		"-kernel", kernelImage, "-initrd", initrd, "-append", appendLine,
		"-chardev", "socket,id=console,path="+consoleSock, "-serial", "chardev:console",
		"-chardev", "socket,id=channel,path="+channelSock, "-serial", "chardev:channel",
	)
	cmd := exec.Command("qemu-system-x86_64", args...)
	cmd.Stdout, cmd.Stderr = qemuLog, qemuLog
	// If vmexec dies, QEMU must not run on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(cfg.Log, "vmexec: qemu-system-x86_64 %s\n", strings.Join(args, " "))
	runtime.LockOSThread() // Pdeathsig follows the thread that forks
	bootStart := time.Now()
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("%w: start qemu-system-x86_64: %w", ErrMissingTool, err)
	}
	qemuDone := make(chan error, 1)
	go func() { qemuDone <- cmd.Wait() }()

	var consoleOut io.Writer = logFile
	if cfg.Console != nil {
		consoleOut = io.MultiWriter(logFile, cfg.Console)
	}
	done := make(chan struct{})
	frames := make(chan frame)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		conn, err := consoleLn.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.Copy(consoleOut, conn)
	}()
	go func() {
		defer wg.Done()
		defer close(frames)
		send := func(f frame) bool {
			select {
			case frames <- f:
				return true
			case <-done:
				return false
			}
		}
		conn, err := channelLn.Accept()
		if err != nil {
			send(frame{err: err})
			return
		}
		defer conn.Close()
		fr := vmproto.NewReader(conn)
		for {
			kind, payload, err := fr.ReadFrame()
			if !send(frame{kind: kind, payload: payload, err: err}) || err != nil {
				return
			}
		}
	}()

	var (
		ph         = phaseBoot
		mark       = bootStart
		exit       *vmproto.Exit
		qemuExited bool
		qemuErr    error
		setupLogs  bytes.Buffer
		chanErr    error
		files      = newReturnedFiles(returns)
	)
	// Whatever happens, QEMU is gone and the readers have stopped when boot
	// returns.
	defer func() {
		close(done)
		if !qemuExited {
			cmd.Process.Kill()
			<-qemuDone
		}
		consoleLn.Close()
		channelLn.Close()
		wg.Wait()
		files.close()
	}()
	advance := func(next phase) time.Duration {
		now := time.Now()
		d := now.Sub(mark)
		mark, ph = now, next
		return d
	}
	var shutdownTimer <-chan time.Time
	// Run until QEMU has exited and the channel is drained.
	for !qemuExited || frames != nil {
		select {
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w while %v: %w", ErrInterrupted, ph, ctx.Err())
			}
			return fmt.Errorf("%w after %v while %v", ErrTimeout, cfg.Timeout, ph)
		case <-shutdownTimer:
			fmt.Fprintf(cfg.Log, "vmexec: QEMU still running 30s after the exit report; killed\n")
			cmd.Process.Kill()
			shutdownTimer = nil
		case qemuErr = <-qemuDone:
			qemuExited = true
			// QEMU closed its end; the reader sees EOF after the last frame.
			consoleLn.Close()
			channelLn.Close()
		case f, ok := <-frames:
			if !ok {
				frames = nil
				continue
			}
			if f.err != nil {
				if !errors.Is(f.err, io.EOF) && !errors.Is(f.err, net.ErrClosed) {
					chanErr = f.err
					fmt.Fprintf(cfg.Log, "vmexec: channel: %v\n", f.err)
				}
				continue
			}
			switch f.kind {
			case vmproto.KindHello:
				if string(f.payload) != vmproto.Hello {
					return fmt.Errorf("%w: guest init speaks %q, want %q (stale vminit?)", ErrSetup, f.payload, vmproto.Hello)
				}
				res.Boot = advance(phaseSetup)
			case vmproto.KindReady:
				res.Setup = advance(phaseRun)
			case vmproto.KindStdout:
				cfg.Stdout.Write(f.payload)
			case vmproto.KindStderr:
				cfg.Stderr.Write(f.payload)
			case vmproto.KindLog:
				if cfg.Console == nil { // else already shown from the console
					fmt.Fprintf(cfg.Log, "vminit: %s\n", f.payload)
				}
				if ph <= phaseSetup {
					fmt.Fprintf(&setupLogs, "vminit: %s\n", f.payload)
				}
			case vmproto.KindFile:
				if err := files.write(f.payload); err != nil {
					return err
				}
			case vmproto.KindExit:
				exit = decodeExit(f.payload)
				if ph == phaseRun {
					res.Run = advance(phaseShutdown)
				} else {
					advance(phaseShutdown)
				}
				shutdownTimer = time.After(30 * time.Second)
			}
		}
	}
	if exit != nil {
		res.Shutdown = advance(phaseShutdown)
	}
	files.close()
	switch {
	case exit == nil:
		qlog, _ := os.ReadFile(qemuLog.Name())
		detail := strings.TrimSpace(string(qlog))
		if chanErr != nil {
			detail += fmt.Sprintf(" (channel: %v)", chanErr)
		}
		err := fmt.Errorf("%w while %v: qemu: %v %s", ErrGuestLost, ph, qemuErr, detail)
		if ph == phaseBoot {
			err = fmt.Errorf("%w: %w", errNoBoot, err)
		}
		return err
	case files.err != nil:
		return files.err
	case exit.SetupError != "":
		if setupLogs.Len() > 0 {
			return fmt.Errorf("%w: %s\n%s", ErrSetup, exit.SetupError, strings.TrimSpace(setupLogs.String()))
		}
		return fmt.Errorf("%w: %s", ErrSetup, exit.SetupError)
	case exit.RunError != "":
		return fmt.Errorf("%w: %s", ErrBadProgram, exit.RunError)
	case exit.Code < 0:
		return fmt.Errorf("%w: unreadable exit report", ErrGuestLost)
	}
	res.ExitCode, res.Signal = exit.Code, exit.Signal
	return nil
}

type frame struct {
	kind    byte
	payload []byte
	err     error
}

func decodeExit(b []byte) *vmproto.Exit {
	var e vmproto.Exit
	if err := json.Unmarshal(b, &e); err != nil {
		return &vmproto.Exit{Code: -1}
	}
	return &e
}

// returnedFiles writes the files the guest sends back, only at the paths
// the host asked for (or below the directories it asked for).
type returnedFiles struct {
	allowed []string
	open    map[string]*os.File
	err     error
}

func newReturnedFiles(paths []string) *returnedFiles {
	allowed := append([]string(nil), paths...)
	sort.Strings(allowed)
	return &returnedFiles{allowed: allowed, open: map[string]*os.File{}}
}

func (r *returnedFiles) write(payload []byte) error {
	p, data, err := vmproto.DecodeFileChunk(payload)
	if err != nil {
		return err
	}
	p = filepath.Clean(p)
	ok := false
	for _, a := range r.allowed {
		if p == a || strings.HasPrefix(p, a+"/") {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("%w: guest sent back %s, which was not asked for", vmproto.ErrFrame, p)
	}
	f := r.open[p]
	if f == nil {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("returned file: %w", err)
		}
		if f, err = os.Create(p); err != nil {
			return fmt.Errorf("returned file: %w", err)
		}
		r.open[p] = f
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("returned file: %w", err)
	}
	return nil
}

func (r *returnedFiles) close() {
	for p, f := range r.open {
		if err := f.Close(); err != nil && r.err == nil {
			r.err = fmt.Errorf("returned file %s: %w", p, err)
		}
		delete(r.open, p)
	}
}
