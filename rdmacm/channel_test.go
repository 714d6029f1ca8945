package rdmacm

import (
	"errors"
	"strings"
	"testing"
)

// TestNotLoaded: without the connection manager's node (rdma_ucm not
// loaded) NewEventChannel says so and how to load it.
func TestNotLoaded(t *testing.T) {
	old := devicePath
	devicePath = t.TempDir() + "/rdma_cm"
	defer func() { devicePath = old }()
	ch, err := NewEventChannel()
	if err == nil {
		ch.Close()
		t.Fatal("opened a missing node")
	}
	if !errors.Is(err, ErrNotLoaded) || !strings.Contains(err.Error(), "modprobe rdma_ucm") {
		t.Fatalf("error %v, want ErrNotLoaded with the fix", err)
	}
	if _, err := Dial(t.Context(), "10.99.0.1:1"); err != nil && !strings.Contains(err.Error(), "modprobe rdma_ucm") {
		t.Fatalf("Dial: %v", err)
	}
}
