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

func setU[T ~uint8 | ~uint16 | ~uint32 | ~uint64](p *T) func(uint64) {
	return func(v uint64) { *p = T(v) }
}

// deviceAttrSetters maps the fixture's ibv_device_attr_ex field paths to
// the DeviceAttr fields.
func deviceAttrSetters(a *uverbs.DeviceAttr) map[string]func(uint64) {
	return map[string]func(uint64){
		"node_guid":                 func(v uint64) { a.NodeGUID = uverbs.GUID(v) },
		"sys_image_guid":            func(v uint64) { a.SysImageGUID = uverbs.GUID(v) },
		"max_mr_size":               setU(&a.MaxMRSize),
		"page_size_cap":             setU(&a.PageSizeCap),
		"vendor_id":                 setU(&a.VendorID),
		"vendor_part_id":            setU(&a.VendorPartID),
		"hw_ver":                    setU(&a.HWVer),
		"max_qp":                    setU(&a.MaxQP),
		"max_qp_wr":                 setU(&a.MaxQPWr),
		"device_cap_flags":          setU(&a.DeviceCapFlags),
		"max_sge":                   setU(&a.MaxSGE),
		"max_sge_rd":                setU(&a.MaxSGERd),
		"max_cq":                    setU(&a.MaxCQ),
		"max_cqe":                   setU(&a.MaxCQE),
		"max_mr":                    setU(&a.MaxMR),
		"max_pd":                    setU(&a.MaxPD),
		"max_qp_rd_atom":            setU(&a.MaxQPRdAtom),
		"max_ee_rd_atom":            setU(&a.MaxEERdAtom),
		"max_res_rd_atom":           setU(&a.MaxResRdAtom),
		"max_qp_init_rd_atom":       setU(&a.MaxQPInitRdAtom),
		"max_ee_init_rd_atom":       setU(&a.MaxEEInitRdAtom),
		"atomic_cap":                setU(&a.AtomicCap),
		"max_ee":                    setU(&a.MaxEE),
		"max_rdd":                   setU(&a.MaxRDD),
		"max_mw":                    setU(&a.MaxMW),
		"max_raw_ipv6_qp":           setU(&a.MaxRawIPv6QP),
		"max_raw_ethy_qp":           setU(&a.MaxRawEthyQP),
		"max_mcast_grp":             setU(&a.MaxMcastGrp),
		"max_mcast_qp_attach":       setU(&a.MaxMcastQPAttach),
		"max_total_mcast_qp_attach": setU(&a.MaxTotalMcastQPAttach),
		"max_ah":                    setU(&a.MaxAH),
		"max_fmr":                   setU(&a.MaxFMR),
		"max_map_per_fmr":           setU(&a.MaxMapPerFMR),
		"max_srq":                   setU(&a.MaxSRQ),
		"max_srq_wr":                setU(&a.MaxSRQWr),
		"max_srq_sge":               setU(&a.MaxSRQSGE),
		"max_pkeys":                 setU(&a.MaxPkeys),
		"local_ca_ack_delay":        setU(&a.LocalCAAckDelay),
		"phys_port_cnt":             setU(&a.PhysPortCnt),
		"odp_caps.general_caps":     setU(&a.ODPCaps.General),
		"odp_caps.per_transport_caps.rc_odp_caps": setU(&a.ODPCaps.RC),
		"odp_caps.per_transport_caps.uc_odp_caps": setU(&a.ODPCaps.UC),
		"odp_caps.per_transport_caps.ud_odp_caps": setU(&a.ODPCaps.UD),
		"xrc_odp_caps":                            setU(&a.ODPCaps.XRC),
		"completion_timestamp_mask":               setU(&a.CompletionTimestampMask),
		"hca_core_clock":                          setU(&a.HCACoreClock),
		"device_cap_flags_ex":                     setU(&a.DeviceCapFlagsEx),
		"tso_caps.max_tso":                        setU(&a.TSOCaps.MaxTSO),
		"tso_caps.supported_qpts":                 setU(&a.TSOCaps.SupportedQPTs),
		"rss_caps.supported_qpts":                 setU(&a.RSSCaps.SupportedQPTs),
		"rss_caps.max_rwq_indirection_tables":     setU(&a.RSSCaps.MaxRWQIndirectionTables),
		"rss_caps.max_rwq_indirection_table_size": setU(&a.RSSCaps.MaxRWQIndirectionTableSize),
		"rss_caps.rx_hash_fields_mask":            setU(&a.RSSCaps.RxHashFieldsMask),
		"rss_caps.rx_hash_function":               setU(&a.RSSCaps.RxHashFunction),
		"max_wq_type_rq":                          setU(&a.MaxWQTypeRQ),
		"packet_pacing_caps.qp_rate_limit_min":    setU(&a.PacketPacingCaps.QPRateLimitMin),
		"packet_pacing_caps.qp_rate_limit_max":    setU(&a.PacketPacingCaps.QPRateLimitMax),
		"packet_pacing_caps.supported_qpts":       setU(&a.PacketPacingCaps.SupportedQPTs),
		"raw_packet_caps":                         setU(&a.RawPacketCaps),
		"tm_caps.max_rndv_hdr_size":               setU(&a.TMCaps.MaxRndvHdrSize),
		"tm_caps.max_num_tags":                    setU(&a.TMCaps.MaxNumTags),
		"tm_caps.flags":                           setU(&a.TMCaps.Flags),
		"tm_caps.max_ops":                         setU(&a.TMCaps.MaxOps),
		"tm_caps.max_sge":                         setU(&a.TMCaps.MaxSGE),
		"cq_mod_caps.max_cq_count":                setU(&a.CQModCaps.MaxCQCount),
		"cq_mod_caps.max_cq_period":               setU(&a.CQModCaps.MaxCQPeriod),
		"max_dm_size":                             setU(&a.MaxDMSize),
	}
}

func portAttrSetters(a *uverbs.PortAttr) map[string]func(uint64) {
	return map[string]func(uint64){
		"state":           setU(&a.State),
		"max_mtu":         setU(&a.MaxMTU),
		"active_mtu":      setU(&a.ActiveMTU),
		"gid_tbl_len":     setU(&a.GIDTblLen),
		"port_cap_flags":  setU(&a.PortCapFlags),
		"max_msg_sz":      setU(&a.MaxMsgSz),
		"bad_pkey_cntr":   setU(&a.BadPkeyCntr),
		"qkey_viol_cntr":  setU(&a.QkeyViolCntr),
		"pkey_tbl_len":    setU(&a.PkeyTblLen),
		"lid":             setU(&a.LID),
		"sm_lid":          setU(&a.SMLID),
		"lmc":             setU(&a.LMC),
		"max_vl_num":      setU(&a.MaxVLNum),
		"sm_sl":           setU(&a.SMSL),
		"subnet_timeout":  setU(&a.SubnetTimeout),
		"init_type_reply": setU(&a.InitTypeReply),
		"active_width":    setU(&a.ActiveWidth),
		"active_speed":    setU(&a.ActiveSpeed),
		"phys_state":      setU(&a.PhysState),
		"link_layer":      setU(&a.LinkLayer),
		"flags":           setU(&a.Flags),
		"port_cap_flags2": setU(&a.PortCapFlags2),
	}
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
			d = &fakeDev{h: hca{name: fields[1], info: hcaInfo{Index: -1, ABIVersion: -1}}, ports: map[uint8]*fakePort{}, gids: map[[2]int]fakeGID{}}
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
			set, ok := deviceAttrSetters(&d.attr)[fields[1]]
			if !ok {
				return nil, bad(errors.New("unknown attribute"))
			}
			set(num(2))
		case "port":
			p = &fakePort{}
			d.ports[uint8(num(1))] = p
		case "pattr":
			set, ok := portAttrSetters(&p.attr)[fields[1]]
			if !ok {
				return nil, bad(errors.New("unknown port attribute"))
			}
			set(num(2))
		case "port_fail":
			p.fail = unix.Errno(num(1))
		case "gid", "gidtype_fail":
			port, index := int(num(1)), int(num(2))
			g, e := parseGID(fields[3])
			if e != nil {
				return nil, bad(e)
			}
			fg := fakeGID{entry: uverbs.GIDEntry{GID: g, Index: uint32(index), Port: uint32(port)}}
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
