package uverbs

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMemlockLimit registers more than RLIMIT_MEMLOCK allows, from a thread
// without CAP_IPC_LOCK: the error is the kernel's ENOMEM, explained.
func TestMemlockLimit(t *testing.T) {
	requireVM(t)
	c := openRXE(t, TransportAuto)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	buf, err := AllocBuffer(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	errc := make(chan error, 1)
	go func() {
		// Capabilities are per thread: drop CAP_IPC_LOCK on this one only,
		// and never unlock it, so the runtime retires the thread with it.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_IPC_LOCK
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		mr, err := pd.RegisterBuffer(buf, 0, buf.Len(), AccessLocalWrite)
		if err == nil {
			mr.Close()
			errc <- errors.New("a 4 MiB registration under a 64 KiB limit succeeded")
			return
		}
		errc <- err
	}()
	err = <-errc
	if !errors.Is(err, unix.ENOMEM) || !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") || !strings.Contains(err.Error(), "ulimit -l") {
		t.Fatalf("err = %v, want ENOMEM explained with RLIMIT_MEMLOCK", err)
	}
	t.Log(err)
}
