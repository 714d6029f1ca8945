package sysfs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Reasons a device is not usable, found in Device.Problem with errors.Is.
var (
	// ErrNoUverbs: no uverbs character device is bound to the device
	// (ib_uverbs is not loaded, or the driver offers no user verbs).
	ErrNoUverbs = errors.New("no uverbs character device is bound to the device")
	// ErrNoCharDev: the device's node under /dev/infiniband is missing, is
	// not a character device, or has another device number than sysfs says.
	ErrNoCharDev = errors.New("the uverbs character device node is missing or wrong")
	// ErrNoAccess: the caller may not open the character device for reading
	// and writing, which the driver needs (rdma-core opens it O_RDWR). The
	// error also wraps the errno, so errors.Is(err, fs.ErrPermission) holds.
	ErrNoAccess = errors.New("no read-write access to the uverbs character device")
	// ErrABIVersion: the kernel's uverbs ABI (the class-wide
	// infiniband_verbs/abi_version) is missing or outside the 3..6 range
	// rdma-core and this driver speak.
	ErrABIVersion = errors.New("the kernel's uverbs ABI version is not supported")
)

// ErrNoDevice is returned by FS.Device and FS.ReadGID for a name that is not
// an RDMA device. It comes wrapped with fs.ErrNotExist.
var ErrNoDevice = errors.New("no such RDMA device")

// ErrGIDEmpty is returned by FS.ReadGID for an empty GID table slot (the
// kernel shows those as the all-zero GID). errors.Is(err, unix.ENODATA) also
// holds, which is the errno rdma-core's ibv_query_gid_ex gives for it.
var ErrGIDEmpty error = gidEmptyError{}

type gidEmptyError struct{}

func (gidEmptyError) Error() string { return "GID table entry is empty" }

func (gidEmptyError) Is(target error) bool { return target == unix.ENODATA }

// The kernel uverbs ABI range rdma-core accepts (IB_USER_VERBS_MIN/MAX_ABI_VERSION,
// libibverbs/kern-abi.h).
const (
	MinUverbsABI = 3
	MaxUverbsABI = 6
)

// errInvalid is the errno the kernel's sysfs show functions return for
// values they refuse to print (an empty GID entry's type, an invalid rate).
var errInvalid error = unix.EINVAL
