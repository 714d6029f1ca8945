package uverbs

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// ErrNoGID is returned by QueryGID for an empty GID table slot; it also
// matches unix.ENODATA, the kernel's word for it.
var ErrNoGID error = noGIDError{}

type noGIDError struct{}

func (noGIDError) Error() string        { return "uverbs: GID table entry is empty" }
func (noGIDError) Is(target error) bool { return target == unix.ENODATA }

// QueryGID returns entry index of port's GID table. An empty slot gives
// ErrNoGID. Kernels without the GID ioctl (and TransportWrite) are answered
// from sysfs, as rdma-core does.
func (c *Context) QueryGID(port uint8, index int) (GIDEntry, error) {
	if err := c.check(); err != nil {
		return GIDEntry{}, err
	}
	if err := c.checkPort("query_gid", port); err != nil {
		return GIDEntry{}, err
	}
	if index < 0 || index > 0x7fff_ffff {
		return GIDEntry{}, fmt.Errorf("uverbs: query_gid on %s port %d: GID index %d out of range: %w", c.name, port, index, unix.EINVAL)
	}
	var e abi.GIDEntry
	var out GIDEntry
	q := transport.NewIoctl(abi.ObjectDevice, abi.MethodQueryGIDEntry)
	defer q.Free()
	q.Const(abi.AttrQueryGIDEntryPort, uint64(port))
	q.Const(abi.AttrQueryGIDEntryGIDIndex, uint64(index))
	q.U32(abi.AttrQueryGIDEntryFlags, 0)
	q.Out(abi.AttrQueryGIDEntryRespEntry, asBytes(&e))
	viaSysfs := false
	err := c.conn.IoctlOrWrite("query_gid_entry", transport.OpQueryGID, q, func() error {
		viaSysfs = true
		var err error
		out, err = c.sysfsGIDEntry(port, index, nil)
		return err
	})
	switch {
	case errors.Is(err, unix.ENODATA):
		return GIDEntry{}, ErrNoGID
	case err != nil:
		return GIDEntry{}, err
	case viaSysfs:
		return out, nil
	}
	return gidEntry(&e), nil
}

// maxGIDTblLen bounds the GID table length QueryGIDTable believes: far
// above any device's (rxe 1024, mlx5 255), far below what would exhaust
// memory.
const maxGIDTblLen = 1 << 16

// QueryGIDTable returns every non-empty GID of every port.
func (c *Context) QueryGIDTable() ([]GIDEntry, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	ports, err := c.portAttrs()
	if err != nil {
		return nil, err
	}
	max := 0
	for _, pa := range ports {
		// The length sizes an allocation: a corrupt answer must not ask
		// for gigabytes.
		if pa.attr.GIDTblLen > maxGIDTblLen {
			return nil, fmt.Errorf("uverbs: query_gid_table on %s: port %d reports a %d-entry GID table, beyond any device's %d: %w",
				c.name, pa.num, pa.attr.GIDTblLen, maxGIDTblLen, unix.EOVERFLOW)
		}
		max += int(pa.attr.GIDTblLen)
	}
	entSize := int(unsafe.Sizeof(abi.GIDEntry{}))
	ents := make([]abi.GIDEntry, max)
	var n uint64
	q := transport.NewIoctl(abi.ObjectDevice, abi.MethodQueryGIDTable)
	defer q.Free()
	q.Const(abi.AttrQueryGIDTableEntrySize, uint64(entSize))
	q.U32(abi.AttrQueryGIDTableFlags, 0)
	q.Out(abi.AttrQueryGIDTableRespEntries, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ents))), max*entSize))
	q.Out(abi.AttrQueryGIDTableRespNumEntries, asBytes(&n))
	var table []GIDEntry
	viaSysfs := false
	err = c.conn.IoctlOrWrite("query_gid_table", transport.OpQueryGID, q, func() error {
		viaSysfs = true
		for _, pa := range ports {
			for i := 0; i < int(pa.attr.GIDTblLen); i++ {
				e, err := c.sysfsGIDEntry(pa.num, i, &pa.attr)
				if errors.Is(err, unix.ENODATA) {
					continue
				}
				if err != nil {
					return err
				}
				table = append(table, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if viaSysfs {
		return table, nil
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("uverbs: query_gid_table on %s: kernel reported %d entries for a %d-entry buffer", c.name, n, max)
	}
	table = make([]GIDEntry, n)
	for i := range table {
		table[i] = gidEntry(&ents[i])
	}
	return table, nil
}

type portAttr struct {
	num  uint8
	attr PortAttr
}

// portAttrs queries every port of the device.
func (c *Context) portAttrs() ([]portAttr, error) {
	var out []portAttr
	for _, p := range c.dev.ports {
		pa, err := c.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		out = append(out, portAttr{uint8(p), pa})
	}
	return out, nil
}

func (c *Context) checkPort(verb string, port uint8) error {
	if port == 0 {
		return fmt.Errorf("uverbs: %s on %s: port 0 is invalid; ports are numbered from 1: %w", verb, c.name, unix.EINVAL)
	}
	return nil
}

func gidEntry(e *abi.GIDEntry) GIDEntry {
	return GIDEntry{
		GID:           *(*GID)(unsafe.Pointer(&e.GID)),
		Index:         int(e.GIDIndex),
		Port:          uint8(e.PortNum),
		Type:          GIDType(e.GIDType),
		NetdevIfindex: e.NetdevIfindex,
	}
}
