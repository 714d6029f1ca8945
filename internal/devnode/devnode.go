// Package devnode explains why a process may not open an RDMA character
// device (/dev/infiniband/uverbsN, /dev/infiniband/rdma_cm): the node's mode
// and owners against the process's identity, and how to grant access.
package devnode

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// AccessAdvice says why the process may not open the character device at
// path and how to grant it: the node's mode and owners against the
// process's identity, and the usual remedies (rdma-core leaves the node to
// the kernel's 0666 or to udev). udevKernel is the udev KERNEL match of the
// node ("uverbs*", "rdma_cm").
func AccessAdvice(path, udevKernel string) string {
	who := fmt.Sprintf("this process runs as uid %s", idName(os.Geteuid(), true))
	if groups, err := os.Getgroups(); err == nil {
		names := make([]string, 0, len(groups)+1)
		names = append(names, idName(os.Getegid(), false))
		for _, g := range groups {
			if g != os.Getegid() {
				names = append(names, idName(g, false))
			}
		}
		who += fmt.Sprintf(" with groups %v", names)
	}
	node := path
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			node = fmt.Sprintf("%s is mode %04o, owner %s, group %s", path, fi.Mode().Perm(),
				idName(int(st.Uid), true), idName(int(st.Gid), false))
		}
	}
	return fmt.Sprintf("%s, and %s; grant read-write access with a udev rule "+
		`(e.g. KERNEL=="%s", GROUP="rdma", MODE="0660", and the user in group rdma) `+
		"or, in a container, by passing the device read-write", node, who, udevKernel)
}

// idName formats a user or group id with its name where the system has one.
func idName(id int, isUser bool) string {
	s := strconv.Itoa(id)
	if isUser {
		if u, err := user.LookupId(s); err == nil {
			return s + " (" + u.Username + ")"
		}
	} else if g, err := user.LookupGroupId(s); err == nil {
		return s + " (" + g.Name + ")"
	}
	return s
}
