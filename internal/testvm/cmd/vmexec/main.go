// Command vmexec runs a program inside a Debian kernel under QEMU (TCG) with
// two rxe devices set up, and behaves like that program: its stdout and
// stderr come out byte for byte on vmexec's, and its exit status is
// vmexec's.
//
// As a go test wrapper (go test runs it in the package directory):
//
//	go test -exec "$PWD/bin/vmexec -kernel 6.1" ./...
//
// Directly:
//
//	vmexec -kernel 6.12 [-add host[:guest]]... -- prog args...
//
// A program given with a "/" is copied from the host (same absolute path in
// the guest, shared libraries included); a bare name runs a command of the
// guest (ibv_devinfo, ib_write_bw, rdma, ip, and busybox's sh and applets).
//
// Exit status: the program's; 124 when the VM timed out; 125 when the
// harness or the VM setup failed (the message says which and where the
// kernel console log was kept); 127 when the program cannot be started;
// 130 when vmexec was interrupted (SIGINT, SIGTERM, or go test's SIGQUIT).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/testvm"
)

const (
	exitTimeout     = 124
	exitHarness     = 125
	exitNotFound    = 127 // as a shell says of a command it cannot run
	exitInterrupted = 130
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	fl := flag.NewFlagSet("vmexec", flag.ContinueOnError)
	kernel := fl.String("kernel", envOr("GOVERBS_VM_KERNEL_NAME", "6.12"), "kernel name: "+strings.Join(testvm.KernelNames, ", ")+", or an exact linux-image-* package")
	timeout := fl.Duration("timeout", testvm.DefaultTimeout, "wall-clock limit of the whole run")
	setupTimeout := fl.Duration("setup-timeout", 60*time.Second, "limit for the rxe ports to become usable in the guest")
	verbose := fl.Bool("v", os.Getenv("GOVERBS_VM_VERBOSE") != "", "show the kernel console, the harness's steps and timings on stderr")
	keep := fl.Bool("keep", false, "keep the kernel console log even when all went well")
	dir := fl.String("dir", "", "working directory in the guest (default: the current one)")
	mem := fl.Int("m", 1024, "guest memory in MiB")
	cpus := fl.Int("smp", 2, "guest CPUs")
	initBin := fl.String("init", "", "guest init binary (default: vminit beside vmexec, else built)")
	var adds, envs, gets listFlag
	fl.Var(&adds, "add", "copy `host[:guest]` file or directory into the guest (repeatable)")
	fl.Var(&envs, "env", "set `KEY=VALUE` for the program (repeatable)")
	fl.Var(&gets, "get", "bring guest `path` (file or directory) back to the same host path after the run (repeatable)")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: vmexec [flags] [--] program [args...]\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return 2
	}
	cfg := testvm.Config{
		Kernel:       *kernel,
		Program:      fl.Arg(0),
		Args:         fl.Args()[1:],
		Env:          envs,
		Dir:          *dir,
		Returns:      gets,
		Stdout:       os.Stdout,
		Stderr:       os.Stderr,
		Timeout:      *timeout,
		SetupTimeout: *setupTimeout,
		MemoryMiB:    *mem,
		CPUs:         *cpus,
		Init:         *initBin,
		KeepLog:      *keep,
	}
	if cfg.Dir != "" {
		abs, err := filepath.Abs(cfg.Dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
			return 2
		}
		cfg.Dir = abs
	}
	for _, a := range adds {
		host, guest, _ := strings.Cut(a, ":")
		cfg.Adds = append(cfg.Adds, testvm.Add{Host: host, Guest: guest})
	}
	if *verbose {
		cfg.Console = os.Stderr
		cfg.Log = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	defer stop()
	start := time.Now()
	res, err := testvm.Run(ctx, cfg)
	if *verbose && res != nil {
		fmt.Fprintf(os.Stderr, "vmexec: kernel %s (%s): prepare %v, boot %v, setup %v, run %v, power-off %v, total %v\n",
			res.Kernel.Name, res.Kernel.Release, round(res.Prepare), round(res.Boot), round(res.Setup), round(res.Run), round(res.Shutdown), round(time.Since(start)))
	}
	switch {
	case errors.Is(err, testvm.ErrTimeout):
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return exitTimeout
	case errors.Is(err, testvm.ErrInterrupted):
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return exitInterrupted
	case errors.Is(err, testvm.ErrBadProgram):
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return exitNotFound
	case err != nil:
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return exitHarness
	}
	if res.ConsoleLog != "" && (res.ExitCode != 0 || *verbose || *keep) {
		fmt.Fprintf(os.Stderr, "vmexec: kernel console log kept at %s\n", res.ConsoleLog)
	}
	return res.ExitCode
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
