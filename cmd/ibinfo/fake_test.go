package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// Fakes of the system and its devices, and the fixture format that feeds
// both them and the C reference harness (testdata/cref/mockverbs.c, which
// documents the format).

type fakePort struct {
	attr uverbs.PortAttr
	fail unix.Errno
}

type fakeGID struct {
	entry uverbs.GIDEntry
	err   error
}

type fakeDev struct {
	h          hca
	openFail   bool
	queryFail  bool
	closeFail  bool
	ncv        int
	attr       uverbs.DeviceAttr
	ports      map[uint8]*fakePort
	gids       map[[2]int]fakeGID
	queryCount int // QueryGID calls, for tests of how much is asked
}

func (d *fakeDev) QueryDevice() (uverbs.DeviceAttr, error) {
	if d.queryFail {
		return uverbs.DeviceAttr{}, fmt.Errorf("query_device: %w", unix.EIO)
	}
	return d.attr, nil
}

func (d *fakeDev) QueryPort(port uint8) (uverbs.PortAttr, error) {
	p, ok := d.ports[port]
	switch {
	case !ok:
		return uverbs.PortAttr{}, fmt.Errorf("query_port %d: %w", port, unix.EINVAL)
	case p.fail != 0:
		return uverbs.PortAttr{}, fmt.Errorf("query_port %d: %w", port, p.fail)
	}
	return p.attr, nil
}

func (d *fakeDev) QueryGID(port uint8, index int) (uverbs.GIDEntry, error) {
	d.queryCount++
	g, ok := d.gids[[2]int{int(port), index}]
	if !ok {
		return uverbs.GIDEntry{}, uverbs.ErrNoGID
	}
	return g.entry, g.err
}

func (d *fakeDev) NumCompVectors() int { return d.ncv }

func (d *fakeDev) Close() error {
	if d.closeFail {
		return errors.New("close failed")
	}
	return nil
}

type fakeSystem struct {
	devs     []*fakeDev
	skipped  []unusable
	listFail bool
}

func (s *fakeSystem) Devices() ([]hca, []unusable, error) {
	if s.listFail {
		return nil, s.skipped, &listError{perror: "Function not implemented", err: errors.New("the RDMA subsystem is not loaded")}
	}
	var hs []hca
	for _, d := range s.devs {
		hs = append(hs, d.h)
	}
	return hs, s.skipped, nil
}

func (s *fakeSystem) Open(h hca) (device, error) {
	for _, d := range s.devs {
		if d.h.name == h.name {
			if d.openFail {
				return nil, fmt.Errorf("open %s: %w", h.name, unix.EACCES)
			}
			return d, nil
		}
	}
	return nil, fmt.Errorf("open %s: no such device", h.name)
}

// fieldRef names one attribute as the fixture (and ibv_device_attr_ex or
// ibv_port_attr) does and points at the uverbs field holding it.
type fieldRef struct {
	name string
	ptr  any
}

func (f fieldRef) set(v uint64) {
	switch p := f.ptr.(type) {
	case *uint8:
		*p = uint8(v)
	case *uint16:
		*p = uint16(v)
	case *uint32:
		*p = uint32(v)
	case *uint64:
		*p = v
	case *uverbs.GUID:
		*p = uverbs.GUID(v)
	case *uverbs.AtomicCap:
		*p = uverbs.AtomicCap(v)
	case *uverbs.PortState:
		*p = uverbs.PortState(v)
	case *uverbs.PhysState:
		*p = uverbs.PhysState(v)
	case *uverbs.MTU:
		*p = uverbs.MTU(v)
	case *uverbs.LinkLayer:
		*p = uverbs.LinkLayer(v)
	default:
		panic(fmt.Sprintf("fieldRef %s: unhandled %T", f.name, f.ptr))
	}
}

func (f fieldRef) get() uint64 {
	switch p := f.ptr.(type) {
	case *uint8:
		return uint64(*p)
	case *uint16:
		return uint64(*p)
	case *uint32:
		return uint64(*p)
	case *uint64:
		return *p
	case *uverbs.GUID:
		return uint64(*p)
	case *uverbs.AtomicCap:
		return uint64(*p)
	case *uverbs.PortState:
		return uint64(*p)
	case *uverbs.PhysState:
		return uint64(*p)
	case *uverbs.MTU:
		return uint64(*p)
	case *uverbs.LinkLayer:
		return uint64(*p)
	}
	panic(fmt.Sprintf("fieldRef %s: unhandled %T", f.name, f.ptr))
}

// deviceAttrFields maps the fixture's ibv_device_attr_ex field paths to the
// DeviceAttr fields.
func deviceAttrFields(a *uverbs.DeviceAttr) []fieldRef {
	return []fieldRef{
		{"node_guid", &a.NodeGUID},
		{"sys_image_guid", &a.SysImageGUID},
		{"max_mr_size", &a.MaxMRSize},
		{"page_size_cap", &a.PageSizeCap},
		{"vendor_id", &a.VendorID},
		{"vendor_part_id", &a.VendorPartID},
		{"hw_ver", &a.HWVer},
		{"max_qp", &a.MaxQP},
		{"max_qp_wr", &a.MaxQPWr},
		{"device_cap_flags", &a.DeviceCapFlags},
		{"max_sge", &a.MaxSGE},
		{"max_sge_rd", &a.MaxSGERd},
		{"max_cq", &a.MaxCQ},
		{"max_cqe", &a.MaxCQE},
		{"max_mr", &a.MaxMR},
		{"max_pd", &a.MaxPD},
		{"max_qp_rd_atom", &a.MaxQPRdAtom},
		{"max_ee_rd_atom", &a.MaxEERdAtom},
		{"max_res_rd_atom", &a.MaxResRdAtom},
		{"max_qp_init_rd_atom", &a.MaxQPInitRdAtom},
		{"max_ee_init_rd_atom", &a.MaxEEInitRdAtom},
		{"atomic_cap", &a.AtomicCap},
		{"max_ee", &a.MaxEE},
		{"max_rdd", &a.MaxRDD},
		{"max_mw", &a.MaxMW},
		{"max_raw_ipv6_qp", &a.MaxRawIPv6QP},
		{"max_raw_ethy_qp", &a.MaxRawEthyQP},
		{"max_mcast_grp", &a.MaxMcastGrp},
		{"max_mcast_qp_attach", &a.MaxMcastQPAttach},
		{"max_total_mcast_qp_attach", &a.MaxTotalMcastQPAttach},
		{"max_ah", &a.MaxAH},
		{"max_fmr", &a.MaxFMR},
		{"max_map_per_fmr", &a.MaxMapPerFMR},
		{"max_srq", &a.MaxSRQ},
		{"max_srq_wr", &a.MaxSRQWr},
		{"max_srq_sge", &a.MaxSRQSGE},
		{"max_pkeys", &a.MaxPkeys},
		{"local_ca_ack_delay", &a.LocalCAAckDelay},
		{"phys_port_cnt", &a.PhysPortCnt},
		{"odp_caps.general_caps", &a.ODPCaps.General},
		{"odp_caps.per_transport_caps.rc_odp_caps", &a.ODPCaps.RC},
		{"odp_caps.per_transport_caps.uc_odp_caps", &a.ODPCaps.UC},
		{"odp_caps.per_transport_caps.ud_odp_caps", &a.ODPCaps.UD},
		{"xrc_odp_caps", &a.ODPCaps.XRC},
		{"completion_timestamp_mask", &a.CompletionTimestampMask},
		{"hca_core_clock", &a.HCACoreClock},
		{"device_cap_flags_ex", &a.DeviceCapFlagsEx},
		{"tso_caps.max_tso", &a.TSOCaps.MaxTSO},
		{"tso_caps.supported_qpts", &a.TSOCaps.SupportedQPTs},
		{"rss_caps.supported_qpts", &a.RSSCaps.SupportedQPTs},
		{"rss_caps.max_rwq_indirection_tables", &a.RSSCaps.MaxRWQIndirectionTables},
		{"rss_caps.max_rwq_indirection_table_size", &a.RSSCaps.MaxRWQIndirectionTableSize},
		{"rss_caps.rx_hash_fields_mask", &a.RSSCaps.RxHashFieldsMask},
		{"rss_caps.rx_hash_function", &a.RSSCaps.RxHashFunction},
		{"max_wq_type_rq", &a.MaxWQTypeRQ},
		{"packet_pacing_caps.qp_rate_limit_min", &a.PacketPacingCaps.QPRateLimitMin},
		{"packet_pacing_caps.qp_rate_limit_max", &a.PacketPacingCaps.QPRateLimitMax},
		{"packet_pacing_caps.supported_qpts", &a.PacketPacingCaps.SupportedQPTs},
		{"raw_packet_caps", &a.RawPacketCaps},
		{"tm_caps.max_rndv_hdr_size", &a.TMCaps.MaxRndvHdrSize},
		{"tm_caps.max_num_tags", &a.TMCaps.MaxNumTags},
		{"tm_caps.flags", &a.TMCaps.Flags},
		{"tm_caps.max_ops", &a.TMCaps.MaxOps},
		{"tm_caps.max_sge", &a.TMCaps.MaxSGE},
		{"cq_mod_caps.max_cq_count", &a.CQModCaps.MaxCQCount},
		{"cq_mod_caps.max_cq_period", &a.CQModCaps.MaxCQPeriod},
		{"max_dm_size", &a.MaxDMSize},
	}
}

// portAttrFields maps ibv_port_attr field names to the PortAttr fields.
func portAttrFields(a *uverbs.PortAttr) []fieldRef {
	return []fieldRef{
		{"state", &a.State},
		{"max_mtu", &a.MaxMTU},
		{"active_mtu", &a.ActiveMTU},
		{"gid_tbl_len", &a.GIDTblLen},
		{"port_cap_flags", &a.PortCapFlags},
		{"max_msg_sz", &a.MaxMsgSz},
		{"bad_pkey_cntr", &a.BadPkeyCntr},
		{"qkey_viol_cntr", &a.QkeyViolCntr},
		{"pkey_tbl_len", &a.PkeyTblLen},
		{"lid", &a.LID},
		{"sm_lid", &a.SMLID},
		{"lmc", &a.LMC},
		{"max_vl_num", &a.MaxVLNum},
		{"sm_sl", &a.SMSL},
		{"subnet_timeout", &a.SubnetTimeout},
		{"init_type_reply", &a.InitTypeReply},
		{"active_width", &a.ActiveWidth},
		{"active_speed", &a.ActiveSpeed},
		{"phys_state", &a.PhysState},
		{"link_layer", &a.LinkLayer},
		{"flags", &a.Flags},
		{"port_cap_flags2", &a.PortCapFlags2},
	}
}

func findField(fields []fieldRef, name string) (fieldRef, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return fieldRef{}, false
}

func parseGID(s string) (uverbs.GID, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return uverbs.GID{}, fmt.Errorf("bad GID %q", s)
	}
	return uverbs.GID(b), nil
}

// loadFixture reads a fixture file into a fake system.
func loadFixture(path string) (*fakeSystem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sys := &fakeSystem{}
	var d *fakeDev
	var p *fakePort
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		bad := func(err error) error { return fmt.Errorf("%s:%d: %q: %v", path, n, line, err) }
		num := func(i int) uint64 {
			if i >= len(fields) {
				err = errors.New("missing field")
				return 0
			}
			v, e := strconv.ParseUint(fields[i], 0, 64)
			if e != nil {
				err = e
			}
			return v
		}
		if fields[0] == "list_fail" {
			sys.listFail = true
			continue
		}
		if fields[0] == "device" {
			d = &fakeDev{h: hca{name: fields[1], info: hcaInfo{ABIVersion: -1}}, ports: map[uint8]*fakePort{}, gids: map[[2]int]fakeGID{}}
			sys.devs = append(sys.devs, d)
			p = nil
			continue
		}
		if d == nil {
			return nil, bad(errors.New("before any device"))
		}
		switch fields[0] {
		case "node_type":
			d.h.nodeType = int(int32(num(1)))
		case "board_id":
			d.h.boardID = []byte{}
			if fields[1] != "-" {
				d.h.boardID, err = hex.DecodeString(fields[1])
			}
		case "open_fail":
			d.openFail = true
		case "query_fail":
			d.queryFail = true
		case "close_fail":
			d.closeFail = true
		case "num_comp_vectors":
			d.ncv = int(int32(num(1)))
		case "attr":
			if fields[1] == "fw_ver" {
				d.attr.FWVer = strings.TrimPrefix(line, "attr fw_ver ")
				break
			}
			f, ok := findField(deviceAttrFields(&d.attr), fields[1])
			if !ok {
				return nil, bad(errors.New("unknown attribute"))
			}
			f.set(num(2))
		case "port":
			p = &fakePort{}
			d.ports[uint8(num(1))] = p
		case "pattr":
			f, ok := findField(portAttrFields(&p.attr), fields[1])
			if !ok {
				return nil, bad(errors.New("unknown port attribute"))
			}
			f.set(num(2))
		case "port_fail":
			p.fail = unix.Errno(num(1))
		case "gid", "gidtype_fail":
			port, index := int(num(1)), int(num(2))
			g, e := parseGID(fields[3])
			if e != nil {
				return nil, bad(e)
			}
			fg := fakeGID{entry: uverbs.GIDEntry{GID: g, Index: index, Port: uint8(port)}}
			if fields[0] == "gid" {
				fg.entry.Type = uverbs.GIDType(num(4))
				fg.entry.NetdevIfindex = 7
			} else {
				fg.err = fmt.Errorf("query_gid: %w: %w", errGIDType, unix.EINVAL)
			}
			d.gids[[2]int{port, index}] = fg
		case "gid_fail":
			d.gids[[2]int{int(num(1)), int(num(2))}] = fakeGID{err: fmt.Errorf("query_gid: %w", unix.EIO)}
		default:
			return nil, bad(errors.New("unknown line"))
		}
		if err != nil {
			return nil, bad(err)
		}
	}
	return sys, sc.Err()
}
