package rdmanl

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	nl "github.com/goverbs/goverbs/internal/rdmanl"
	"github.com/goverbs/goverbs/uverbs"
)

// reply builds one nldev reply datagram (then the end of the exchange).
func reply(cmd uint16, attrs ...[]byte) [][]byte {
	var b []byte
	for _, a := range attrs {
		b = append(b, a...)
	}
	return [][]byte{nl.AppendRequest(nil, nl.MsgType(cmd), nl.NLM_F_MULTI, 0, b), endOfExchange}
}

func nest(typ uint16, parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return nl.AppendAttr(nil, typ|0x8000, b) // NLA_F_NESTED, as the kernel sets it
}

// TestQPCountersParse decodes a per-QP counter dump as mlx5 sends it (rxe
// has no per-QP counters, so the VM cannot show one).
func TestQPCountersParse(t *testing.T) {
	hw := func(name string, v uint64) []byte {
		return nest(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY, nl.AppendStringAttr(nil, nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, name),
			nl.AppendU64Attr(nil, nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, v))
	}
	qp := func(n uint32) []byte {
		return nest(nl.RDMA_NLDEV_ATTR_RES_QP_ENTRY, nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_RES_LQPN, n))
	}
	// As the kernel's fill_stat_counter_mode sends them: an auto counter
	// bound by type and PID names its owner (here a kernel module); one
	// bound by type alone, or a manual one, names none.
	byPID := nest(nl.RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY,
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_PORT_INDEX, 1),
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_STAT_COUNTER_ID, 4),
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_STAT_MODE, nl.RDMA_COUNTER_MODE_AUTO),
		nl.AppendU8Attr(nil, nl.RDMA_NLDEV_ATTR_RES_TYPE, 2),
		nl.AppendStringAttr(nil, nl.RDMA_NLDEV_ATTR_RES_KERN_NAME, "nvme_rdma"),
		nest(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, hw("rx_write_requests", 7), hw("out_of_sequence", 1)),
		nest(nl.RDMA_NLDEV_ATTR_RES_QP, qp(0x81), qp(0x82)))
	manual := nest(nl.RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY,
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_PORT_INDEX, 1),
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_STAT_COUNTER_ID, 5),
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_STAT_MODE, nl.RDMA_COUNTER_MODE_MANUAL),
		nest(nl.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, hw("rx_write_requests", 2)),
		nest(nl.RDMA_NLDEV_ATTR_RES_QP, qp(0x90)))
	c := &Conn{c: nl.Replay(reply(nl.RDMA_NLDEV_CMD_STAT_GET,
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, 3), nl.AppendStringAttr(nil, nl.RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0"),
		nest(nl.RDMA_NLDEV_ATTR_STAT_COUNTER, byPID, manual)))}
	got, err := c.QPCounters(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []QPCounter{
		{DevIndex: 3, DevName: "mlx5_0", Port: 1, ID: 4, QPType: uverbs.QPTypeRC, HaveQPType: true,
			Owner:    Owner{Kernel: true, Comm: "nvme_rdma"},
			Counters: []Counter{{"rx_write_requests", 7}, {"out_of_sequence", 1}}, LQPNs: []uint32{0x81, 0x82}},
		{DevIndex: 3, DevName: "mlx5_0", Port: 1, ID: 5,
			Counters: []Counter{{"rx_write_requests", 2}}, LQPNs: []uint32{0x90}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QPCounters (-want +got):\n%s", diff)
	}
	if !got[0].Owner.Known() || got[1].Owner.Known() {
		t.Errorf("Owner.Known = %v, %v; want true, false", got[0].Owner.Known(), got[1].Owner.Known())
	}
	for i, w := range []string{
		`{"cntn":4,"comm":"nvme_rdma","ifindex":3,"ifname":"mlx5_0","lqpn":[129,130],"out_of_sequence":1,"port":1,"qp-type":"RC","rx_write_requests":7}`,
		`{"cntn":5,"ifindex":3,"ifname":"mlx5_0","lqpn":[144],"port":1,"rx_write_requests":2}`,
	} {
		b, err := got[i].MarshalJSON()
		if err != nil || string(b) != w {
			t.Errorf("MarshalJSON = %s, %v; want %s", b, err, w)
		}
	}
}

// TestPortCountersEINVAL: the kernel's EINVAL to STAT_GET is ErrNotSupported
// where the port exists (a device without hardware counters), ErrNotFound
// where it does not.
func TestPortCountersEINVAL(t *testing.T) {
	e := unix.EINVAL
	einval := nl.AppendRequest(nil, nl.NLMSG_ERROR, 0, 0, append(ne32(uint32(-int32(e))), make([]byte, 16)...))
	port := reply(nl.RDMA_NLDEV_CMD_PORT_GET,
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_DEV_INDEX, 2), nl.AppendStringAttr(nil, nl.RDMA_NLDEV_ATTR_DEV_NAME, "siw0"),
		nl.AppendU32Attr(nil, nl.RDMA_NLDEV_ATTR_PORT_INDEX, 1),
		nl.AppendU8Attr(nil, nl.RDMA_NLDEV_ATTR_PORT_STATE, 4), nl.AppendU8Attr(nil, nl.RDMA_NLDEV_ATTR_PORT_PHYS_STATE, 5))
	for _, tc := range []struct {
		name  string
		data  [][]byte
		want  error
		other error
	}{
		{"port without counters", append([][]byte{einval}, port...), ErrNotSupported, ErrNotFound},
		{"no such port", [][]byte{einval, einval}, ErrNotFound, ErrNotSupported},
	} {
		c := &Conn{c: nl.Replay(tc.data)}
		_, err := c.PortCounters(context.Background(), 2, 1)
		if !errors.Is(err, tc.want) || errors.Is(err, tc.other) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: PortCounters: %v; want %v (EINVAL), not %v", tc.name, err, tc.want, tc.other)
		}
	}
}

// TestKernelErrors maps the kernel's answers to the package's errors.
func TestKernelErrors(t *testing.T) {
	nack := func(errno unix.Errno) [][]byte {
		p := ne32(uint32(-int32(errno)))
		p = append(p, make([]byte, 16)...)
		return [][]byte{nl.AppendRequest(nil, nl.NLMSG_ERROR, 0, 0, p)}
	}
	for _, tc := range []struct {
		errno unix.Errno
		want  error
	}{
		{unix.ENODEV, ErrNetdevNotFound}, {unix.ENFILE, ErrNameTaken}, {unix.EEXIST, ErrNetdevInUse},
		{unix.EPERM, nil},
	} {
		// EINVAL and EEXIST make AddLink look the name up; the replay
		// has nothing more, so only unambiguous answers are checked here.
		c := &Conn{c: nl.Replay(nack(tc.errno))}
		err := c.AddLink(context.Background(), "rxe9", LinkRXE, "eth0")
		if !errors.Is(err, tc.errno) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("errno %v: %v, want %v", tc.errno, err, tc.want)
		}
	}
}

func ne32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
