package uverbs

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/sysfs"
)

// nonRootEnv makes the test binary, re-executed as an unprivileged user,
// play the child of TestNonRootNoAccess.
const nonRootEnv = "GOVERBS_NONROOT_CHILD"

// TestNonRootNoAccess opens rxe0 as a user without access to its uverbs
// node (mode 0600, root's): Open fails with an error that matches
// sysfs.ErrNoAccess and fs.ErrPermission, names the file, its mode and
// owners and the user, and says how to grant access.
func TestNonRootNoAccess(t *testing.T) {
	if os.Getenv(nonRootEnv) != "" {
		nonRootChild(t)
		return
	}
	requireVM(t)
	vmenv.LockUverbsNodes(t)
	out, code := vmenv.RunAsNobody(t, os.Args[0], []string{nonRootEnv + "=1"}, "-test.run=^TestNonRootNoAccess$", "-test.v")
	t.Logf("as uid %d:\n%s", vmenv.Nobody, out)
	if code != 0 || !strings.Contains(out, "--- PASS: TestNonRootNoAccess") {
		t.Errorf("the unprivileged child failed (exit %d)", code)
	}
}

func nonRootChild(t *testing.T) {
	if os.Geteuid() != vmenv.Nobody {
		t.Fatalf("child runs as uid %d, want %d", os.Geteuid(), vmenv.Nobody)
	}
	c, err := Open(vmenv.RXE0)
	if err == nil {
		c.Close()
		t.Fatal("Open succeeded without access to the uverbs node")
	}
	t.Logf("Open(%s): %v", vmenv.RXE0, err)
	if !errors.Is(err, sysfs.ErrNoAccess) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("the error matches neither sysfs.ErrNoAccess nor fs.ErrPermission")
	}
	for _, want := range []string{"/dev/infiniband/uverbs", "mode 0600", "owner 0", "uid 65534", "udev rule", `MODE="0660"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q", want)
		}
	}
}
