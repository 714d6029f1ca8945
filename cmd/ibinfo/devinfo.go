package main

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/cli"
	"github.com/goverbs/goverbs/uverbs"
)

// This file prints what rdma-core v44.0's ibv_devinfo prints
// (libibverbs/examples/devinfo.c), byte for byte: the same lines, tabs,
// C integer conversions (fields the kernel reports as unsigned but
// libibverbs stores as int print negative past 2^31) and the same exit
// codes. Queries run in the order ibv_devinfo runs them, so a failure stops
// the output at the same line.

// Per-device results of ibv_devinfo's print_hca_cap, OR'ed into the exit
// status. rcPort is the port-check failure; a failed port query returns its
// errno, a failed GID query -1.
const (
	rcOpen  = 1
	rcQuery = 2
	rcClose = 3
	rcPort  = 4
)

// Transport types (enum ibv_transport_type); ibv_devinfo prints the number.
const (
	transportUnknown     = -1
	transportIB          = 0
	transportIWARP       = 1
	transportUSNIC       = 2
	transportUSNICUDP    = 3
	transportUnspecified = 4
)

// transportOf maps a kernel node type (sysfs node_type, enum
// rdma_node_type) to the transport libibverbs derives from it.
func transportOf(nodeType int) int {
	switch nodeType {
	case 1, 2, 3: // CA, switch, router
		return transportIB
	case 4: // RNIC
		return transportIWARP
	case 5:
		return transportUSNIC
	case 6:
		return transportUSNICUDP
	case 7:
		return transportUnspecified
	}
	return transportUnknown
}

func transportStr(t int) string {
	switch t {
	case transportIB:
		return "InfiniBand"
	case transportIWARP:
		return "iWARP"
	case transportUSNIC:
		return "usNIC"
	case transportUSNICUDP:
		return "usNIC UDP"
	case transportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// portStateStr is ibv_devinfo's spelling of the port state.
func portStateStr(s uverbs.PortState) string {
	switch s {
	case uverbs.PortDown:
		return "PORT_DOWN"
	case uverbs.PortInit:
		return "PORT_INIT"
	case uverbs.PortArmed:
		return "PORT_ARMED"
	case uverbs.PortActive:
		return "PORT_ACTIVE"
	}
	return "invalid state"
}

// physStateStr is ibv_devinfo's spelling of the physical state.
func physStateStr(s uverbs.PhysState) string {
	switch s {
	case uverbs.PhysSleep:
		return "SLEEP"
	case uverbs.PhysPolling:
		return "POLLING"
	case uverbs.PhysDisabled:
		return "DISABLED"
	case uverbs.PhysPortConfigurationTraining:
		return "PORT_CONFIGURATION TRAINNING" // sic, as ibv_devinfo
	case uverbs.PhysLinkUp:
		return "LINK_UP"
	case uverbs.PhysLinkErrorRecovery:
		return "LINK_ERROR_RECOVERY"
	case uverbs.PhysPhyTest:
		return "PHY TEST"
	}
	return "invalid physical state"
}

func atomicCapStr(a uverbs.AtomicCap) string {
	switch a {
	case uverbs.AtomicNone, uverbs.AtomicHCA, uverbs.AtomicGlob:
		return a.String()
	}
	return "invalid atomic capability"
}

func mtuStr(m uverbs.MTU) string {
	if m.Bytes() == 0 {
		return "invalid MTU"
	}
	return fmt.Sprint(m.Bytes())
}

func widthStr(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

// speedStr is v44's table: it predates the XDR speeds and active_speed_ex.
func speedStr(s uint8) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	}
	return "invalid speed"
}

func vlStr(n uint8) string {
	switch n {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}

func linkLayerStr(l uverbs.LinkLayer) string { return l.String() }

// flagName is one named bit of a capability mask.
type flagName struct {
	bit  uint64
	name string
}

// deviceCapFlags are the IBV_DEVICE_* bits v44 names, in its print order.
var deviceCapFlags = []flagName{
	{1 << 0, "RESIZE_MAX_WR"},
	{1 << 1, "BAD_PKEY_CNTR"},
	{1 << 2, "BAD_QKEY_CNTR"},
	{1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"},
	{1 << 5, "CHANGE_PHY_PORT"},
	{1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"},
	{1 << 8, "SHUTDOWN_PORT"},
	{1 << 9, "INIT_TYPE"},
	{1 << 10, "PORT_ACTIVE_EVENT"},
	{1 << 11, "SYS_IMAGE_GUID"},
	{1 << 12, "RC_RNR_NAK_GEN"},
	{1 << 13, "SRQ_RESIZE"},
	{1 << 14, "N_NOTIFY_CQ"},
	{1 << 17, "MEM_WINDOW"},
	{1 << 18, "UD_IP_CSUM"},
	{1 << 20, "XRC"},
	{1 << 21, "MEM_MGT_EXTENSIONS"},
	{1 << 23, "MEM_WINDOW_TYPE_2A"},
	{1 << 24, "MEM_WINDOW_TYPE_2B"},
	{1 << 25, "RC_IP_CSUM"},
	{1 << 26, "RAW_IP_CSUM"},
	{1 << 29, "MANAGED_FLOW_STEERING"},
}

// deviceCapFlagsEx are the upper-half IBV_DEVICE_* bits v44 names.
var deviceCapFlagsEx = []flagName{
	{1 << 34, "RAW_SCATTER_FCS"},
	{1 << 36, "PCI_WRITE_END_PADDING"},
}

var odpGeneralCaps = []flagName{
	{1 << 0, "ODP_SUPPORT"},
	{1 << 1, "ODP_SUPPORT_IMPLICIT"},
}

var odpTransportCaps = []flagName{
	{1 << 0, "SUPPORT_SEND"},
	{1 << 1, "SUPPORT_RECV"},
	{1 << 2, "SUPPORT_WRITE"},
	{1 << 3, "SUPPORT_READ"},
	{1 << 4, "SUPPORT_ATOMIC"},
	{1 << 5, "SUPPORT_SRQ"},
}

var rawPacketCaps = []flagName{
	{1 << 0, "C-VLAN stripping offload"},
	{1 << 1, "Scatter FCS offload"},
	{1 << 2, "IP csum offload"},
	{1 << 3, "Delay drop"},
}

// QP types as bits of a supported_qpts mask (1 << IBV_QPT_*).
const (
	qptUDBit        = 1 << 4
	qptRawPacketBit = 1 << 8
)

var supportedQPTs = []flagName{
	{qptRawPacketBit, "SUPPORT_RAW_PACKET"},
	{qptUDBit, "SUPPORT_UD"},
}

// known is the union of a table's bits.
func known(names []flagName) uint64 {
	var m uint64
	for _, f := range names {
		m |= f.bit
	}
	return m
}

// flagNames lists the names of the bits set in v, in table order.
func flagNames(v uint64, names []flagName) []string {
	var out []string
	for _, f := range names {
		if v&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return out
}

// printer writes formatted text and keeps the first write error, so the
// formatting code reads like the C it mirrors.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// printFlags prints one "\t\t\t\t\t<name>" line per set bit, then the bits
// the table does not know as "Unknown flags: 0x%X" (width as in C).
func (p *printer) printFlags(v uint64, names []flagName) {
	for _, n := range flagNames(v, names) {
		p.printf("\t\t\t\t\t%s\n", n)
	}
	if u := v &^ known(names); u != 0 {
		p.printf("\t\t\t\t\tUnknown flags: 0x%X\n", u)
	}
}

// device is what ibv_devinfo queries on an open device. *uverbs.Context
// implements it; tests use fakes.
type device interface {
	QueryDevice() (uverbs.DeviceAttr, error)
	QueryPort(port uint8) (uverbs.PortAttr, error)
	QueryGID(port uint8, index int) (uverbs.GIDEntry, error)
	NumCompVectors() int
	Close() error
}

// printHCA is ibv_devinfo's print_hca_cap: it opens the device, prints its
// block (only port ibPort when that is non-zero) and returns the device's
// result code.
func printHCA(stdout, stderr io.Writer, sys system, h hca, ibPort uint8, verbose bool) int {
	dev, err := sys.Open(h)
	if err != nil {
		fmt.Fprintf(stderr, "Failed to open device\n")
		fmt.Fprintf(stderr, "ibinfo: %v\n", err)
		return rcOpen
	}
	rc := printOpenHCA(stdout, stderr, dev, h, ibPort, verbose)
	if err := dev.Close(); err != nil {
		fmt.Fprintf(stderr, "Failed to close device")
		fmt.Fprintf(stderr, "\nibinfo: %v\n", err)
		rc = rcClose
	}
	return rc
}

func printOpenHCA(stdout, stderr io.Writer, dev device, h hca, ibPort uint8, verbose bool) int {
	attr, err := dev.QueryDevice()
	if err != nil {
		fmt.Fprintf(stderr, "Failed to query device props\n")
		fmt.Fprintf(stderr, "ibinfo: %v\n", err)
		return rcQuery
	}
	if ibPort != 0 && ibPort > attr.PhysPortCnt {
		fmt.Fprintf(stderr, "Invalid port requested for device\n")
		return rcPort
	}
	p := &printer{w: stdout}
	printDeviceBlock(p, h, &attr, dev.NumCompVectors(), verbose)
	for port := 1; port <= int(attr.PhysPortCnt); port++ {
		if ibPort != 0 && port != int(ibPort) {
			continue
		}
		pa, err := dev.QueryPort(uint8(port))
		if err != nil {
			fmt.Fprintf(stderr, "Failed to query port %d props\n", port)
			fmt.Fprintf(stderr, "ibinfo: %v\n", err)
			return errnoRC(err)
		}
		printPortBlock(p, h, port, &pa, verbose)
		if verbose {
			if rc := printPortGIDs(p, stderr, dev, port, &pa); rc != 0 {
				return rc
			}
		}
		p.printf("\n")
	}
	return 0
}

// errnoRC is the code a failed libibverbs call returns: its errno, or -1.
func errnoRC(err error) int {
	var errno unix.Errno
	if errors.As(err, &errno) && errno != 0 {
		return int(errno)
	}
	return -1
}

// printDeviceBlock prints the hca_id line through num_comp_vectors.
func printDeviceBlock(p *printer, h hca, a *uverbs.DeviceAttr, numCompVectors int, verbose bool) {
	p.printf("hca_id:\t%s\n", h.name)
	t := transportOf(h.nodeType)
	p.printf("\ttransport:\t\t\t%s (%d)\n", transportStr(t), t)
	if fw := cFWVer(a.FWVer); fw != "" {
		p.printf("\tfw_ver:\t\t\t\t%s\n", fw)
	}
	p.printf("\tnode_guid:\t\t\t%s\n", a.NodeGUID)
	p.printf("\tsys_image_guid:\t\t\t%s\n", a.SysImageGUID)
	p.printf("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p.printf("\tvendor_part_id:\t\t\t%d\n", int32(a.VendorPartID))
	p.printf("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	if id, ok := boardIDText(h.boardID); ok {
		p.printf("\tboard_id:\t\t\t%s\n", id)
	}
	p.printf("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if !verbose {
		return
	}
	p.printf("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	p.printf("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	p.printf("\tmax_qp:\t\t\t\t%d\n", int32(a.MaxQP))
	p.printf("\tmax_qp_wr:\t\t\t%d\n", int32(a.MaxQPWr))
	p.printf("\tdevice_cap_flags:\t\t0x%08x\n", a.DeviceCapFlags)
	p.printFlags(uint64(a.DeviceCapFlags), deviceCapFlags)
	p.printf("\tmax_sge:\t\t\t%d\n", int32(a.MaxSGE))
	p.printf("\tmax_sge_rd:\t\t\t%d\n", int32(a.MaxSGERd))
	p.printf("\tmax_cq:\t\t\t\t%d\n", int32(a.MaxCQ))
	p.printf("\tmax_cqe:\t\t\t%d\n", int32(a.MaxCQE))
	p.printf("\tmax_mr:\t\t\t\t%d\n", int32(a.MaxMR))
	p.printf("\tmax_pd:\t\t\t\t%d\n", int32(a.MaxPD))
	p.printf("\tmax_qp_rd_atom:\t\t\t%d\n", int32(a.MaxQPRdAtom))
	p.printf("\tmax_ee_rd_atom:\t\t\t%d\n", int32(a.MaxEERdAtom))
	p.printf("\tmax_res_rd_atom:\t\t%d\n", int32(a.MaxResRdAtom))
	p.printf("\tmax_qp_init_rd_atom:\t\t%d\n", int32(a.MaxQPInitRdAtom))
	p.printf("\tmax_ee_init_rd_atom:\t\t%d\n", int32(a.MaxEEInitRdAtom))
	p.printf("\tatomic_cap:\t\t\t%s (%d)\n", atomicCapStr(a.AtomicCap), int32(a.AtomicCap))
	p.printf("\tmax_ee:\t\t\t\t%d\n", int32(a.MaxEE))
	p.printf("\tmax_rdd:\t\t\t%d\n", int32(a.MaxRDD))
	p.printf("\tmax_mw:\t\t\t\t%d\n", int32(a.MaxMW))
	p.printf("\tmax_raw_ipv6_qp:\t\t%d\n", int32(a.MaxRawIPv6QP))
	p.printf("\tmax_raw_ethy_qp:\t\t%d\n", int32(a.MaxRawEthyQP))
	p.printf("\tmax_mcast_grp:\t\t\t%d\n", int32(a.MaxMcastGrp))
	p.printf("\tmax_mcast_qp_attach:\t\t%d\n", int32(a.MaxMcastQPAttach))
	p.printf("\tmax_total_mcast_qp_attach:\t%d\n", int32(a.MaxTotalMcastQPAttach))
	p.printf("\tmax_ah:\t\t\t\t%d\n", int32(a.MaxAH))
	p.printf("\tmax_fmr:\t\t\t%d\n", int32(a.MaxFMR))
	if a.MaxFMR != 0 {
		p.printf("\tmax_map_per_fmr:\t\t%d\n", int32(a.MaxMapPerFMR))
	}
	p.printf("\tmax_srq:\t\t\t%d\n", int32(a.MaxSRQ))
	if a.MaxSRQ != 0 {
		p.printf("\tmax_srq_wr:\t\t\t%d\n", int32(a.MaxSRQWr))
		p.printf("\tmax_srq_sge:\t\t\t%d\n", int32(a.MaxSRQSGE))
	}
	p.printf("\tmax_pkeys:\t\t\t%d\n", a.MaxPkeys)
	p.printf("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	p.printf("\tgeneral_odp_caps:\n")
	p.printFlags(a.ODPCaps.General, odpGeneralCaps)
	for _, t := range []struct {
		name string
		caps uint32
	}{
		{"rc", a.ODPCaps.RC}, {"uc", a.ODPCaps.UC}, {"ud", a.ODPCaps.UD}, {"xrc", a.ODPCaps.XRC},
	} {
		p.printf("\t%s_odp_caps:\n", t.name)
		if t.caps == 0 {
			p.printf("\t\t\t\t\tNO SUPPORT\n")
		} else {
			p.printFlags(uint64(t.caps), odpTransportCaps)
		}
	}
	if a.CompletionTimestampMask != 0 {
		p.printf("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.CompletionTimestampMask)
	} else {
		p.printf("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		p.printf("\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		p.printf("\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		p.printf("\traw packet caps:\n")
		for _, n := range flagNames(uint64(a.RawPacketCaps), rawPacketCaps) {
			p.printf("\t\t\t\t\t%s\n", n)
		}
	}
	p.printf("\tdevice_cap_flags_ex:\t\t0x%X\n", a.DeviceCapFlagsEx)
	// Only the upper half is decoded: the lower half repeats device_cap_flags.
	p.printFlags(a.DeviceCapFlagsEx&0xffffffff00000000, deviceCapFlagsEx)

	p.printf("\ttso_caps:\n")
	p.printf("\t\tmax_tso:\t\t\t%d\n", int32(a.TSOCaps.MaxTSO))
	if a.TSOCaps.MaxTSO != 0 {
		p.printf("\t\tsupported_qp:\n")
		p.printFlags(uint64(a.TSOCaps.SupportedQPTs), supportedQPTs)
	}
	p.printf("\trss_caps:\n")
	p.printf("\t\tmax_rwq_indirection_tables:\t\t\t%d\n", a.RSSCaps.MaxRWQIndirectionTables)
	p.printf("\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", a.RSSCaps.MaxRWQIndirectionTableSize)
	p.printf("\t\trx_hash_function:\t\t\t\t0x%x\n", a.RSSCaps.RxHashFunction)
	p.printf("\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", a.RSSCaps.RxHashFieldsMask)
	if a.RSSCaps.SupportedQPTs != 0 {
		p.printf("\t\tsupported_qp:\n")
		p.printFlags(uint64(a.RSSCaps.SupportedQPTs), supportedQPTs)
	}
	p.printf("\tmax_wq_type_rq:\t\t\t%d\n", a.MaxWQTypeRQ)
	p.printf("\tpacket_pacing_caps:\n")
	p.printf("\t\tqp_rate_limit_min:\t%dkbps\n", a.PacketPacingCaps.QPRateLimitMin)
	p.printf("\t\tqp_rate_limit_max:\t%dkbps\n", a.PacketPacingCaps.QPRateLimitMax)
	if a.PacketPacingCaps.QPRateLimitMax != 0 {
		p.printf("\t\tsupported_qp:\n")
		p.printFlags(uint64(a.PacketPacingCaps.SupportedQPTs), supportedQPTs)
	}
	if a.TMCaps.MaxNumTags != 0 {
		p.printf("\tmax_rndv_hdr_size:\t\t%d\n", a.TMCaps.MaxRndvHdrSize)
		p.printf("\tmax_num_tags:\t\t\t%d\n", a.TMCaps.MaxNumTags)
		p.printf("\tmax_ops:\t\t\t%d\n", a.TMCaps.MaxOps)
		p.printf("\tmax_sge:\t\t\t%d\n", a.TMCaps.MaxSGE)
		p.printf("\tflags:\n")
		if a.TMCaps.Flags&1 != 0 {
			p.printf("\t\t\t\t\tIBV_TM_CAP_RC\n")
		}
	} else {
		p.printf("\ttag matching not supported\n")
	}
	if a.CQModCaps.MaxCQCount != 0 && a.CQModCaps.MaxCQPeriod != 0 {
		p.printf("\n\tcq moderation caps:\n")
		p.printf("\t\tmax_cq_count:\t%d\n", a.CQModCaps.MaxCQCount)
		p.printf("\t\tmax_cq_period:\t%d us\n\n", a.CQModCaps.MaxCQPeriod)
	}
	if a.MaxDMSize != 0 {
		p.printf("\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	p.printf("\tnum_comp_vectors:\t\t%d\n", int32(numCompVectors))
}

// printPortBlock prints a port's lines up to, not including, its GIDs.
func printPortBlock(p *printer, h hca, port int, a *uverbs.PortAttr, verbose bool) {
	p.printf("\t\tport:\t%d\n", port)
	p.printf("\t\t\tstate:\t\t\t%s (%d)\n", portStateStr(a.State), a.State)
	p.printf("\t\t\tmax_mtu:\t\t%s (%d)\n", mtuStr(a.MaxMTU), a.MaxMTU)
	p.printf("\t\t\tactive_mtu:\t\t%s (%d)\n", mtuStr(a.ActiveMTU), a.ActiveMTU)
	p.printf("\t\t\tsm_lid:\t\t\t%d\n", a.SMLID)
	p.printf("\t\t\tport_lid:\t\t%d\n", a.LID)
	p.printf("\t\t\tport_lmc:\t\t0x%02x\n", a.LMC)
	p.printf("\t\t\tlink_layer:\t\t%s\n", linkLayerStr(a.LinkLayer))
	if !verbose {
		return
	}
	p.printf("\t\t\tmax_msg_sz:\t\t0x%x\n", a.MaxMsgSz)
	p.printf("\t\t\tport_cap_flags:\t\t0x%08x\n", a.PortCapFlags)
	p.printf("\t\t\tport_cap_flags2:\t0x%04x\n", a.PortCapFlags2)
	p.printf("\t\t\tmax_vl_num:\t\t%s (%d)\n", vlStr(a.MaxVLNum), a.MaxVLNum)
	p.printf("\t\t\tbad_pkey_cntr:\t\t0x%x\n", a.BadPkeyCntr)
	p.printf("\t\t\tqkey_viol_cntr:\t\t0x%x\n", a.QkeyViolCntr)
	p.printf("\t\t\tsm_sl:\t\t\t%d\n", a.SMSL)
	p.printf("\t\t\tpkey_tbl_len:\t\t%d\n", a.PkeyTblLen)
	p.printf("\t\t\tgid_tbl_len:\t\t%d\n", int32(a.GIDTblLen))
	p.printf("\t\t\tsubnet_timeout:\t\t%d\n", a.SubnetTimeout)
	p.printf("\t\t\tinit_type_reply:\t%d\n", a.InitTypeReply)
	p.printf("\t\t\tactive_width:\t\t%sX (%d)\n", widthStr(a.ActiveWidth), a.ActiveWidth)
	p.printf("\t\t\tactive_speed:\t\t%s (%d)\n", speedStr(a.ActiveSpeed), a.ActiveSpeed)
	if transportOf(h.nodeType) == transportIB {
		p.printf("\t\t\tphys_state:\t\t%s (%d)\n", physStateStr(a.PhysState), a.PhysState)
	}
}

// gidTypeV1 and gidTypeV2 are ibv_devinfo's view of a GID's type (enum
// ibv_gid_type_sysfs); gidTypeInvalid hides the GID.
const (
	gidTypeV1      = 0
	gidTypeV2      = 1
	gidTypeInvalid = 2
)

// errGIDType marks a QueryGID error that concerns only the GID's type: the
// GID itself was read. ibv_devinfo then prints nothing for the entry.
var errGIDType = errors.New("GID type unknown")

// printPortGIDs is print_all_port_gids: every index below gid_tbl_len whose
// interface ID (bytes 8..15) is non-zero.
func printPortGIDs(p *printer, stderr io.Writer, dev device, port int, a *uverbs.PortAttr) int {
	n := int(int32(a.GIDTblLen))
	for i := 0; i < n; i++ {
		e, err := dev.QueryGID(uint8(port), i)
		typ := gidTypeV1
		switch {
		case errors.Is(err, uverbs.ErrNoGID):
			// An empty slot reads as the zero GID, which is not printed.
			continue
		case errors.Is(err, errGIDType):
			typ = gidTypeInvalid
		case err != nil:
			fmt.Fprintf(stderr, "Failed to query gid to port %d, index %d\n", port, i)
			fmt.Fprintf(stderr, "ibinfo: %v\n", err)
			return -1
		case e.Type == uverbs.GIDTypeIB || e.Type == uverbs.GIDTypeRoCEv1:
			typ = gidTypeV1
		default:
			typ = gidTypeV2
		}
		if nullGID(e.GID) {
			continue
		}
		p.printf("%s", formatGIDLine(e.GID, i, typ, a.LinkLayer))
	}
	return 0
}

// nullGID is devinfo.c's null_gid: only the interface ID counts.
func nullGID(g uverbs.GID) bool {
	for _, b := range g[8:] {
		if b != 0 {
			return false
		}
	}
	return true
}

// formatGIDLine is print_formated_gid: raw groups for IB and RoCE v1,
// inet_ntop for RoCE v2, the type suffix only on Ethernet, and nothing at
// all for an invalid type.
func formatGIDLine(g uverbs.GID, index, typ int, ll uverbs.LinkLayer) string {
	suffix := ""
	if ll == uverbs.LinkLayerEthernet {
		switch typ {
		case gidTypeV1:
			suffix = ", RoCE v1"
		case gidTypeV2:
			suffix = ", RoCE v2"
		default:
			suffix = ", Invalid gid type"
		}
	}
	switch typ {
	case gidTypeV1:
		return fmt.Sprintf("\t\t\tGID[%3d]:\t\t%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x%s\n",
			index, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
			g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15], suffix)
	case gidTypeV2:
		return fmt.Sprintf("\t\t\tGID[%3d]:\t\t%s%s\n", index, cli.InetNtop6(g), suffix)
	}
	return ""
}

// cFWVer is the fw_ver text as printed from libibverbs' char fw_ver[64].
func cFWVer(s string) string {
	b := []byte(s)
	if len(b) > 63 {
		b = b[:63]
	}
	return cString(b)
}

// boardIDText is what ibv_read_sysfs_file leaves of board_id, read with one
// read() into a 256-byte buffer: nothing when the read failed or gave no
// bytes, or when 256 bytes came without a final newline; else the text less
// one trailing newline, up to any NUL. ok is false when ibv_devinfo prints
// no board_id line.
func boardIDText(raw []byte) (string, bool) {
	const size = 256
	if raw == nil {
		return "", false
	}
	if len(raw) > size {
		raw = raw[:size]
	}
	n := len(raw)
	switch {
	case n == 0:
		return "", false
	case raw[n-1] == '\n':
		n--
	case n == size:
		return "", false
	}
	if n == 0 {
		return "", false
	}
	return cString(raw[:n]), true
}
