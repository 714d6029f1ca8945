package main

import (
	"fmt"
	"io"
)

// explain tells the user why no device (or not the named one) is usable:
// the reason the device list failed, and the reasons sysfs gives for the
// devices it has that cannot be opened. ibv_devinfo prints nothing of this.
func explain(w io.Writer, name *string, skipped []unusable, listErr error) {
	if listErr != nil {
		fmt.Fprintf(w, "ibinfo: %v\n", listErr)
	}
	for _, s := range skipped {
		if name != nil && s.name != *name {
			continue
		}
		fmt.Fprintf(w, "ibinfo: %s is present but not usable: %v\n", s.name, s.reason)
	}
}
