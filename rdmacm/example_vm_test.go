package rdmacm_test

import (
	"io"
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestExampleVM runs the package example on the VM's rxe0 and checks what
// it prints (it has no Output comment, since it needs a device).
func TestExampleVM(t *testing.T) {
	vmenv.RequireDevice(t, vmenv.RXE0)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stdout = old }()
		Example()
	}()
	w.Close()
	out := <-done
	r.Close()
	if out != "hello\n" {
		t.Errorf("Example printed %q, want %q", out, "hello\n")
	}
}
