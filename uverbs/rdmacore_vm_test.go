package uverbs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
	"github.com/goverbs/goverbs/internal/testvm/vmproc"
	"github.com/goverbs/goverbs/internal/transport"
)

// The test in this file proves that goverbs sends the kernel the same
// command bytes as rdma-core 44 for the same verbs and parameters.
//
// Inside the test VM it runs rdma-core's own ibv_rc_pingpong and
// ibv_ud_pingpong (server on rxe0, client on rxe1) under an LD_PRELOAD shim
// (testdata/capture/capture.c, built on the host by make capture) that logs
// every ioctl and write() on the uverbs file. It then has goverbs perform
// the same verbs with the same parameters on the same device, recording
// goverbs' commands with transport.Recorder, and compares the two
// command by command, attribute by attribute and field by field.
//
// The parameters are the pingpong tools' own (rdma-core v44.0
// libibverbs/examples/{rc,ud}_pingpong.c) for the command-line options the
// test passes, plus the QPN, PSN, LID and GID each tool prints for itself
// and its peer. They are deliberately not decoded from the captured bytes
// with goverbs' own structures, which would make the comparison circular.
//
// Compared, in order: get_context and alloc_async_fd (opening the device),
// create_comp_channel, alloc_pd, reg_mr, create_cq, create_qp (RC and UD),
// every modify_qp (INIT, RTR, RTS), create_ah, and the destroy commands of
// pp_close_ctx (destroy_qp, destroy_cq, dereg_mr, destroy_ah, dealloc_pd).
// Other commands (query_device, query_port, query_qp, the INVOKE_WRITE
// probe, req_notify_cq, the rxe doorbell) are not compared. Two rdma-core
// runs per tool: as shipped (ioctl, with the write commands inside
// INVOKE_WRITE), compared with goverbs' ioctl and auto transports; and with
// the shim answering every ioctl with ENOTTY, as a kernel without the ioctl
// framework does, so that rdma-core sends plain write()s, compared with
// goverbs' write transport.
//
// Masked, and only these: pointers (the response pointer of write commands,
// reg_mr's start and hca_va, whose equality to each other is still
// compared, and the addresses in pointer attributes, which are not recorded;
// the bytes they point to are compared), object handles (IDR attributes and
// the *_handle fields of the write structures), file descriptors (FD
// attributes, create_cq's comp_channel unless -1) and user handles (the
// USER_HANDLE attributes and user_handle fields: rdma-core puts an object's
// address there, goverbs a counter). What the kernel writes back (handles,
// output buffers, VALID_OUTPUT flags) is not a command byte and is not
// compared; both sides must succeed.

const (
	// captureShimDefault is where make capture puts the shim in the guest.
	captureShimDefault = "/usr/lib/goverbs-capture.so"
	// envCaptureShim names the shim explicitly; then its absence fails.
	envCaptureShim = "GOVERBS_CAPTURE_SHIM"
)

// requireCaptureShim returns the shim's path in the VM, skipping outside it
// and where no shim was added (the capture target adds it).
func requireCaptureShim(t *testing.T) string {
	t.Helper()
	if !vmenv.InVM() {
		t.Skip("compares with rdma-core's commands inside the test VM only (make capture)")
	}
	vmenv.RequireDevice(t, vmenv.RXE0)
	vmenv.RequireDevice(t, vmenv.RXE1)
	p, explicit := os.LookupEnv(envCaptureShim)
	if !explicit {
		p = captureShimDefault
	}
	if _, err := os.Stat(p); err != nil {
		if explicit {
			t.Fatalf("%s=%s: %v (make capture builds bin/capture.so and adds it to the VM)", envCaptureShim, p, err)
		}
		t.Skipf("no capture shim at %s: make capture builds bin/capture.so and adds it to the VM", p)
	}
	for _, tool := range []string{"ibv_rc_pingpong", "ibv_ud_pingpong"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("inside the test VM (kernel %s): %v", vmenv.KernelName(), err)
		}
	}
	return p
}

// pingpongDest is what a pingpong tool prints for itself and its peer.
type pingpongDest struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID GID
}

var pingpongAddrRE = regexp.MustCompile(`(local|remote) address:\s+LID 0x([0-9a-f]+), QPN 0x([0-9a-f]+), PSN 0x([0-9a-f]+)[,:] GID (\S+)`)

func parsePingpongOutput(out string) (local, remote pingpongDest, err error) {
	found := map[string]bool{}
	for _, m := range pingpongAddrRE.FindAllStringSubmatch(out, -1) {
		var d pingpongDest
		lid, err1 := strconv.ParseUint(m[2], 16, 16)
		qpn, err2 := strconv.ParseUint(m[3], 16, 32)
		psn, err3 := strconv.ParseUint(m[4], 16, 32)
		ip := net.ParseIP(m[5])
		if err1 != nil || err2 != nil || err3 != nil || ip == nil {
			return local, remote, fmt.Errorf("unparsable address line %q", m[0])
		}
		d.LID, d.QPN, d.PSN = uint16(lid), uint32(qpn), uint32(psn)
		copy(d.GID[:], ip.To16())
		if m[1] == "local" {
			local = d
		} else {
			remote = d
		}
		found[m[1]] = true
	}
	if !found["local"] || !found["remote"] {
		return local, remote, fmt.Errorf("no local and remote address lines in the output")
	}
	return local, remote, nil
}

// capturedAttr and capturedExchange read the shim's lines: goverbs'
// transcript format plus what only the shim can see.
type capturedAttr struct {
	transport.AttrRecord
	AttrData uint16 `json:"attr_data"`
}

type capturedExchange struct {
	transport.Exchange
	Attrs       []capturedAttr `json:"attrs"`
	Malformed   bool           `json:"malformed"`
	HdrReserved bool           `json:"hdr_reserved"`
	Short       *int           `json:"short"`
}

func readCapture(path string) ([]capturedExchange, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []capturedExchange
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var x capturedExchange
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, x)
	}
	return out, sc.Err()
}

// toolSide is one pingpong process: what it printed and sent.
type toolSide struct {
	Name     string // server or client
	Device   string
	UseEvent bool // -e: a completion channel
	Local    pingpongDest
	Remote   pingpongDest
	Output   string
	Capture  []capturedExchange
}

// runPingpong runs tool as server on rxe0 and client on rxe1 with the shim.
func runPingpong(t *testing.T, shim, tool string, port int, args []string, noIoctl bool) (server, client *toolSide) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	command := func(name string, extra ...string) (*exec.Cmd, *bytes.Buffer) {
		full := append([]string{"-g", strconv.Itoa(vmenv.GIDIndex), "-p", strconv.Itoa(port)}, args...)
		cmd := exec.CommandContext(ctx, tool, append(full, extra...)...)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+shim, "CAPTURE_FILE="+filepath.Join(dir, name), "IBV_DRIVERS=rxe")
		if noIoctl {
			cmd.Env = append(cmd.Env, "CAPTURE_NO_IOCTL=1")
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd, &out
	}
	server = &toolSide{Name: "server", Device: vmenv.RXE0, UseEvent: true}
	client = &toolSide{Name: "client", Device: vmenv.RXE1}
	srv, srvOut := command(server.Name, "-d", server.Device, "-e")
	if err := srv.Start(); err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	for !vmproc.Listening(port) {
		select {
		case err := <-exited:
			t.Fatalf("%s server exited before listening (%v):\n%s", tool, err, srvOut)
		case <-ctx.Done():
			t.Fatalf("%s server did not listen on port %d:\n%s", tool, port, srvOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cli, cliOut := command(client.Name, "-d", client.Device, vmenv.AddrA)
	cliErr := cli.Run()
	srvErr := <-exited
	if cliErr != nil || srvErr != nil {
		t.Fatalf("%s: server: %v\n%s\nclient: %v\n%s", tool, srvErr, srvOut, cliErr, cliOut)
	}
	for _, s := range []struct {
		side *toolSide
		cmd  *exec.Cmd
		out  *bytes.Buffer
	}{{server, srv, srvOut}, {client, cli, cliOut}} {
		s.side.Output = s.out.String()
		var err error
		if s.side.Local, s.side.Remote, err = parsePingpongOutput(s.side.Output); err != nil {
			t.Fatalf("%s %s: %v:\n%s", tool, s.side.Name, err, s.side.Output)
		}
		path := filepath.Join(dir, fmt.Sprintf("%s.%d", s.side.Name, s.cmd.Process.Pid))
		if s.side.Capture, err = readCapture(path); err != nil {
			t.Fatalf("%s %s: capture: %v (did the shim load?)", tool, s.side.Name, err)
		}
	}
	return server, client
}

// Write command numbers (enum ib_uverbs_write_cmds) of the compared verbs.
var comparedWriteCmds = map[uint32]string{
	0:  "get_context",
	3:  "alloc_pd",
	4:  "dealloc_pd",
	5:  "create_ah",
	8:  "destroy_ah",
	9:  "reg_mr",
	13: "dereg_mr",
	17: "create_comp_channel",
	18: "create_cq",
	20: "destroy_cq",
	24: "create_qp",
	26: "modify_qp",
	27: "destroy_qp",
}

// comparedMethods are the compared verbs with a native ioctl method
// (object, method).
var comparedMethods = map[[2]uint16]string{
	{0, 3}:  "get_context",    // UVERBS_METHOD_GET_CONTEXT
	{16, 0}: "alloc_async_fd", // UVERBS_METHOD_ASYNC_EVENT_ALLOC
	{1, 0}:  "dealloc_pd",     // UVERBS_METHOD_PD_DESTROY
	{3, 0}:  "create_cq",      // UVERBS_METHOD_CQ_CREATE
	{3, 1}:  "destroy_cq",     // UVERBS_METHOD_CQ_DESTROY
	{4, 0}:  "create_qp",      // UVERBS_METHOD_QP_CREATE
	{4, 1}:  "destroy_qp",     // UVERBS_METHOD_QP_DESTROY
	{6, 0}:  "destroy_ah",     // UVERBS_METHOD_AH_DESTROY
	{7, 1}:  "dereg_mr",       // UVERBS_METHOD_MR_DESTROY
}

const (
	cmdFlagExtended                                          = 0x80000000
	uverbsIoctlObjDevice, uverbsIoctlObjCQ, uverbsIoctlObjQP = 0, 3, 4
	attrWriteCmd                                             = 2 // UVERBS_ATTR_WRITE_CMD
	attrCoreIn                                               = 0 // UVERBS_ATTR_CORE_IN
)

// verbOf names the compared verb an exchange carries, or "".
func verbOf(x transport.Exchange) string {
	switch x.Op {
	case "ioctl":
		if v, ok := comparedMethods[[2]uint16{x.Object, x.Method}]; ok {
			return v
		}
		switch {
		case x.Object == uverbsIoctlObjDevice && x.Method == 0: // INVOKE_WRITE
			for _, a := range x.Attrs {
				if a.ID == attrWriteCmd {
					return comparedWriteCmds[uint32(a.Data)&^cmdFlagExtended]
				}
			}
		}
	case "write":
		b, err := hex.DecodeString(x.Write)
		if err == nil && len(b) >= 4 {
			return comparedWriteCmds[binary.LittleEndian.Uint32(b)&^cmdFlagExtended]
		}
	}
	return ""
}

// maskKind says how a field is hidden from the comparison.
type maskKind uint8

const (
	noMask maskKind = iota
	maskPointer
	maskHandle
	maskUserHandle
	maskFD // unless -1 (none)
)

// uapiField is a field of a kernel UAPI structure (<rdma/ib_user_verbs.h>,
// Linux 6.1), laid out independently of internal/abi.
type uapiField struct {
	name string
	size int // bytes; 16 for a GID
	mask maskKind
}

type uapiStruct struct {
	name   string
	size   int // sizeof in the UAPI header
	fields []uapiField
}

func uf(name string, size int, m ...maskKind) uapiField {
	fl := uapiField{name: name, size: size}
	if len(m) > 0 {
		fl.mask = m[0]
	}
	return fl
}

// qpDestFields is struct ib_uverbs_qp_dest (32 bytes).
func qpDestFields(prefix string) []uapiField {
	return []uapiField{
		uf(prefix+"dgid", 16), uf(prefix+"flow_label", 4), uf(prefix+"dlid", 2), uf(prefix+"reserved", 2),
		uf(prefix+"sgid_index", 1), uf(prefix+"hop_limit", 1), uf(prefix+"traffic_class", 1), uf(prefix+"sl", 1),
		uf(prefix+"src_path_bits", 1), uf(prefix+"static_rate", 1), uf(prefix+"is_global", 1), uf(prefix+"port_num", 1),
	}
}

func concatFields(parts ...[]uapiField) []uapiField {
	var out []uapiField
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var qpCapStruct = uapiStruct{"ib_uverbs_qp_cap", 20, []uapiField{
	uf("max_send_wr", 4), uf("max_recv_wr", 4), uf("max_send_sge", 4), uf("max_recv_sge", 4), uf("max_inline_data", 4),
}}

// writeStructs are the core request structures of the compared write
// commands, by command number.
var writeStructs = map[uint32]uapiStruct{
	0:  {"ib_uverbs_get_context", 8, []uapiField{uf("response", 8, maskPointer)}},
	3:  {"ib_uverbs_alloc_pd", 8, []uapiField{uf("response", 8, maskPointer)}},
	4:  {"ib_uverbs_dealloc_pd", 4, []uapiField{uf("pd_handle", 4, maskHandle)}},
	8:  {"ib_uverbs_destroy_ah", 4, []uapiField{uf("ah_handle", 4, maskHandle)}},
	13: {"ib_uverbs_dereg_mr", 4, []uapiField{uf("mr_handle", 4, maskHandle)}},
	20: {"ib_uverbs_destroy_cq", 16, []uapiField{
		uf("response", 8, maskPointer), uf("cq_handle", 4, maskHandle), uf("reserved", 4),
	}},
	27: {"ib_uverbs_destroy_qp", 16, []uapiField{
		uf("response", 8, maskPointer), uf("qp_handle", 4, maskHandle), uf("reserved", 4),
	}},
	17: {"ib_uverbs_create_comp_channel", 8, []uapiField{uf("response", 8, maskPointer)}},
	9: {"ib_uverbs_reg_mr", 40, []uapiField{
		uf("response", 8, maskPointer), uf("start", 8, maskPointer), uf("length", 8), uf("hca_va", 8, maskPointer),
		uf("pd_handle", 4, maskHandle), uf("access_flags", 4),
	}},
	18: {"ib_uverbs_create_cq", 32, []uapiField{
		uf("response", 8, maskPointer), uf("user_handle", 8, maskUserHandle), uf("cqe", 4), uf("comp_vector", 4),
		uf("comp_channel", 4, maskFD), uf("reserved", 4),
	}},
	24: {"ib_uverbs_create_qp", 56, []uapiField{
		uf("response", 8, maskPointer), uf("user_handle", 8, maskUserHandle), uf("pd_handle", 4, maskHandle),
		uf("send_cq_handle", 4, maskHandle), uf("recv_cq_handle", 4, maskHandle), uf("srq_handle", 4, maskHandle),
		uf("max_send_wr", 4), uf("max_recv_wr", 4), uf("max_send_sge", 4), uf("max_recv_sge", 4), uf("max_inline_data", 4),
		uf("sq_sig_all", 1), uf("qp_type", 1), uf("is_srq", 1), uf("reserved", 1),
	}},
	26: {"ib_uverbs_modify_qp", 112, concatFields(qpDestFields("dest."), qpDestFields("alt_dest."), []uapiField{
		uf("qp_handle", 4, maskHandle), uf("attr_mask", 4), uf("qkey", 4), uf("rq_psn", 4), uf("sq_psn", 4),
		uf("dest_qp_num", 4), uf("qp_access_flags", 4), uf("pkey_index", 2), uf("alt_pkey_index", 2), uf("qp_state", 1),
		uf("cur_qp_state", 1), uf("path_mtu", 1), uf("path_mig_state", 1), uf("en_sqd_async_notify", 1),
		uf("max_rd_atomic", 1), uf("max_dest_rd_atomic", 1), uf("min_rnr_timer", 1), uf("port_num", 1), uf("timeout", 1),
		uf("retry_cnt", 1), uf("rnr_retry", 1), uf("alt_port_num", 1), uf("alt_timeout", 1), uf("reserved", 2),
	})},
	5: {"ib_uverbs_create_ah", 56, []uapiField{
		uf("response", 8, maskPointer), uf("user_handle", 8, maskUserHandle), uf("pd_handle", 4, maskHandle),
		uf("reserved", 4),
		// struct ib_uverbs_ah_attr, beginning with struct ib_uverbs_global_route
		uf("attr.grh.dgid", 16), uf("attr.grh.flow_label", 4), uf("attr.grh.sgid_index", 1), uf("attr.grh.hop_limit", 1),
		uf("attr.grh.traffic_class", 1), uf("attr.grh.reserved", 1), uf("attr.dlid", 2), uf("attr.sl", 1),
		uf("attr.src_path_bits", 1), uf("attr.static_rate", 1), uf("attr.is_global", 1), uf("attr.port_num", 1),
		uf("attr.reserved", 1),
	}},
}

// fieldValues renders b as s's fields, masked, plus any bytes after the
// structure (provider data) in hex. Every byte of b appears.
func fieldValues(s uapiStruct, b []byte) []string {
	var out []string
	values := map[string]uint64{}
	off := 0
	for _, fl := range s.fields {
		if off+fl.size > len(b) {
			out = append(out, fmt.Sprintf("%s=<missing: %d bytes>", fl.name, len(b)))
			return out
		}
		raw := b[off : off+fl.size]
		off += fl.size
		var v uint64
		switch fl.size {
		case 1:
			v = uint64(raw[0])
		case 2:
			v = uint64(binary.LittleEndian.Uint16(raw))
		case 4:
			v = uint64(binary.LittleEndian.Uint32(raw))
		case 8:
			v = binary.LittleEndian.Uint64(raw)
		}
		values[fl.name] = v
		var text string
		switch fl.mask {
		case maskPointer:
			text = "<pointer>"
			if fl.name == "hca_va" {
				// ibv_reg_mr registers with IOVA = address; so must goverbs.
				if v == values["start"] {
					text = "<pointer, = start>"
				} else {
					text = "<pointer, != start>"
				}
			}
		case maskHandle:
			text = "<handle>"
		case maskUserHandle:
			text = "<user handle>"
		case maskFD:
			text = "<fd>"
			if uint32(v) == 0xffffffff {
				text = "-1"
			}
		default:
			switch fl.size {
			case 1, 2, 4, 8:
				text = fmt.Sprintf("%#x", v)
			default:
				text = hex.EncodeToString(raw)
			}
		}
		out = append(out, fl.name+"="+text)
	}
	if off < len(b) {
		out = append(out, "udata="+hex.EncodeToString(b[off:]))
	}
	return out
}

// cmdView is a command as compared: everything sent, masked.
type cmdView struct {
	Verb   string
	Op     string
	Object uint16     `json:",omitempty"`
	Method uint16     `json:",omitempty"`
	Driver uint32     `json:",omitempty"`
	Attrs  []attrView `json:",omitempty"`
	Fields []string   `json:",omitempty"` // write(): header and core request
}

type attrView struct {
	ID       uint16
	Kind     string
	Flags    uint16
	Len      uint16
	AttrData uint16
	Value    string   `json:",omitempty"` // inline data, or the mask
	Fields   []string `json:",omitempty"` // bytes sent (inline or pointed to)
}

// userHandleAttrs are the USER_HANDLE attributes of the native methods.
var userHandleAttrs = map[[3]uint16]bool{
	{uverbsIoctlObjCQ, 0, 2}: true, // UVERBS_ATTR_CREATE_CQ_USER_HANDLE
	{uverbsIoctlObjQP, 0, 7}: true, // UVERBS_ATTR_CREATE_QP_USER_HANDLE
}

const attrCreateQPCap = 8 // UVERBS_ATTR_CREATE_QP_CAP

func inlineBytes(a transport.AttrRecord) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], a.Data)
	if a.Len < 8 {
		return b[:a.Len]
	}
	return b[:]
}

// view builds the comparable form of x (attrData: the attributes'
// attr_data, where known).
func view(verb string, x transport.Exchange, attrData []uint16) (cmdView, error) {
	v := cmdView{Verb: verb, Op: x.Op}
	switch x.Op {
	case "ioctl":
		v.Object, v.Method, v.Driver = x.Object, x.Method, x.Driver
		var writeCmd uint32
		for _, a := range x.Attrs {
			if x.Object == uverbsIoctlObjDevice && x.Method == 0 && a.ID == attrWriteCmd {
				writeCmd = uint32(a.Data) &^ cmdFlagExtended
			}
		}
		for i, a := range x.Attrs {
			av := attrView{ID: a.ID, Kind: a.Kind, Flags: a.Flags, Len: a.Len}
			if i < len(attrData) {
				av.AttrData = attrData[i]
			}
			var sent []byte
			switch a.Kind {
			case "in":
				sent = inlineBytes(a)
			case "ptr-in":
				b, err := hex.DecodeString(a.In)
				if err != nil {
					return v, fmt.Errorf("attr %d: %w", a.ID, err)
				}
				sent = b
			}
			switch {
			case a.Kind == "idr":
				av.Value = "<handle>"
			case a.Kind == "fd":
				av.Value = "<fd>"
			case a.Kind == "idr-new" || a.Kind == "fd-new":
				av.Value = fmt.Sprintf("%#x", a.Data)
			case userHandleAttrs[[3]uint16{x.Object, x.Method, a.ID}]:
				av.Value = "<user handle>"
			case writeCmd != 0 && a.ID == attrCoreIn:
				s, ok := writeStructs[writeCmd]
				if !ok {
					return v, fmt.Errorf("no UAPI layout for write command %d", writeCmd)
				}
				// The INVOKE_WRITE core request is the write() structure
				// without its 8-byte command header.
				av.Fields = fieldValues(s, sent)
			case x.Object == uverbsIoctlObjQP && x.Method == 0 && a.ID == attrCreateQPCap:
				av.Fields = fieldValues(qpCapStruct, sent)
			case sent != nil && a.Kind == "in":
				av.Value = fmt.Sprintf("%#x", a.Data)
			case sent != nil:
				av.Fields = []string{hex.EncodeToString(sent)}
			}
			v.Attrs = append(v.Attrs, av)
		}
	case "write":
		b, err := hex.DecodeString(x.Write)
		if err != nil {
			return v, err
		}
		if len(b) < 8 {
			return v, fmt.Errorf("write of %d bytes", len(b))
		}
		cmd := binary.LittleEndian.Uint32(b)
		v.Fields = []string{
			fmt.Sprintf("hdr.command=%#x", cmd),
			fmt.Sprintf("hdr.in_words=%d", binary.LittleEndian.Uint16(b[4:])),
			fmt.Sprintf("hdr.out_words=%d", binary.LittleEndian.Uint16(b[6:])),
		}
		core := b[8:]
		if cmd&cmdFlagExtended != 0 {
			if len(b) < 24 {
				return v, fmt.Errorf("extended write of %d bytes", len(b))
			}
			v.Fields = append(v.Fields, "ex_hdr.response=<pointer>",
				fmt.Sprintf("ex_hdr.provider_in_words=%d", binary.LittleEndian.Uint16(b[16:])),
				fmt.Sprintf("ex_hdr.provider_out_words=%d", binary.LittleEndian.Uint16(b[18:])),
				fmt.Sprintf("ex_hdr.cmd_hdr_reserved=%#x", binary.LittleEndian.Uint32(b[20:])))
			core = b[24:]
			v.Fields = append(v.Fields, "ex core="+hex.EncodeToString(core))
			break
		}
		s, ok := writeStructs[cmd]
		if !ok {
			return v, fmt.Errorf("no UAPI layout for write command %d", cmd)
		}
		v.Fields = append(v.Fields, fieldValues(s, core)...)
	default:
		return v, fmt.Errorf("unknown op %q", x.Op)
	}
	return v, nil
}

// rdmaCoreCommands picks the compared commands out of a capture, checking
// they were sent whole and answered with success.
func rdmaCoreCommands(t *testing.T, side *toolSide, noIoctl bool) []cmdView {
	t.Helper()
	var out []cmdView
	for i, cx := range side.Capture {
		x := cx.Exchange
		x.Attrs = nil
		var attrData []uint16
		for _, a := range cx.Attrs {
			x.Attrs = append(x.Attrs, a.AttrRecord)
			attrData = append(attrData, a.AttrData)
		}
		if noIoctl && x.Op == "ioctl" {
			if x.Errno != 25 { // ENOTTY, from the shim
				t.Errorf("%s: capture line %d: an ioctl reached the kernel with ioctls refused", side.Name, i+1)
			}
			continue
		}
		verb := verbOf(x)
		if verb == "" {
			continue
		}
		if cx.Malformed || cx.HdrReserved || cx.Short != nil || x.Errno != 0 {
			t.Fatalf("%s: capture line %d (%s): malformed %v, reserved header bits %v, short write %v, errno %d",
				side.Name, i+1, verb, cx.Malformed, cx.HdrReserved, cx.Short, x.Errno)
		}
		v, err := view(verb, x, attrData)
		if err != nil {
			t.Fatalf("%s: capture line %d (%s): %v", side.Name, i+1, verb, err)
		}
		out = append(out, v)
	}
	return out
}

// goverbsStep is one verb goverbs performs to mirror the tool.
type goverbsStep struct {
	verb string
	do   func() error
}

// pingpongParams are the tool options the test passes.
type pingpongParams struct {
	ud      bool
	size    int
	rxDepth uint32
}

func (p pingpongParams) args() []string {
	a := []string{"-n", "1", "-s", strconv.Itoa(p.size), "-r", strconv.Itoa(int(p.rxDepth))}
	if !p.ud {
		a = append(a, "-m", "1024")
	}
	return a
}

// mirror performs with goverbs, on the tool's device and through tr, what
// the pingpong tool did (pp_init_ctx and pp_connect_ctx of rdma-core v44.0
// libibverbs/examples/{rc,ud}_pingpong.c), and returns goverbs' compared
// commands.
func mirror(t *testing.T, p pingpongParams, side *toolSide, tr Transport) []cmdView {
	t.Helper()
	rec := &transport.Recorder{Kernel: transport.System{}}
	var (
		c   *Context
		ch  *CompChannel
		pd  *PD
		mr  *MR
		cq  *CQ
		qp  *QP
		ah  *AH
		buf *Buffer
	)
	// On failure, whatever was created is released (Close is idempotent).
	var closers []func() error
	t.Cleanup(func() {
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	const port = 1 // the tools' default ib_port
	mrLen, qpType := p.size, QPTypeRC
	if p.ud {
		mrLen, qpType = p.size+40, QPTypeUD // room for the GRH
	}
	steps := []goverbsStep{{"open", func() (err error) {
		c, err = Open(side.Device, WithTransport(tr), withKernel(rec))
		if err == nil {
			closers = append(closers, c.Close)
		}
		return err
	}}}
	if side.UseEvent {
		steps = append(steps, goverbsStep{"create_comp_channel", func() (err error) {
			ch, err = c.NewCompChannel()
			if err == nil {
				closers = append(closers, ch.Close)
			}
			return err
		}})
	}
	steps = append(steps,
		goverbsStep{"alloc_pd", func() (err error) {
			pd, err = c.AllocPD()
			if err == nil {
				closers = append(closers, pd.Close)
			}
			return err
		}},
		goverbsStep{"reg_mr", func() error {
			var err error
			if buf, err = AllocBuffer(mrLen); err != nil {
				return err
			}
			closers = append(closers, buf.Close)
			mr, err = pd.RegisterBuffer(buf, 0, mrLen, AccessLocalWrite)
			if err == nil {
				closers = append(closers, mr.Close)
			}
			return err
		}},
		goverbsStep{"create_cq", func() (err error) {
			cq, err = c.CreateCQ(int(p.rxDepth)+1, &CQOptions{Channel: ch, CompVector: 0})
			if err == nil {
				closers = append(closers, cq.Close)
			}
			return err
		}},
		goverbsStep{"create_qp", func() (err error) {
			qp, err = pd.CreateQP(QPInitAttr{Type: qpType, SendCQ: cq, RecvCQ: cq,
				Cap: QPCap{MaxSendWr: 1, MaxRecvWr: p.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err == nil {
				closers = append(closers, qp.Close)
			}
			return err
		}},
	)
	dest := side.Remote
	grh := binary.BigEndian.Uint64(dest.GID[8:]) != 0 // dest->gid.global.interface_id
	ahAttr := AHAttr{DLID: dest.LID, SL: 0, SrcPathBits: 0, PortNum: port}
	if grh {
		ahAttr.IsGlobal = true
		ahAttr.GRH = GlobalRoute{HopLimit: 1, DGID: dest.GID, SGIDIndex: vmenv.GIDIndex}
	}
	modify := func(a QPAttr, m QPAttrMask) goverbsStep {
		return goverbsStep{"modify_qp", func() error { return qp.Modify(&a, m) }}
	}
	if !p.ud {
		steps = append(steps,
			modify(QPAttr{State: QPStateInit, PkeyIndex: 0, Port: port, AccessFlags: 0},
				QPAttrState|QPAttrPkeyIndex|QPAttrPort|QPAttrAccessFlags),
			modify(QPAttr{State: QPStateRTR, PathMTU: MTU1024, DestQPN: dest.QPN, RQPSN: dest.PSN,
				MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: ahAttr},
				QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer),
			modify(QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: side.Local.PSN, MaxRdAtomic: 1},
				QPAttrState|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrSQPSN|QPAttrMaxQPRdAtomic),
		)
	} else {
		steps = append(steps,
			modify(QPAttr{State: QPStateInit, PkeyIndex: 0, Port: port, Qkey: 0x11111111},
				QPAttrState|QPAttrPkeyIndex|QPAttrPort|QPAttrQkey),
			modify(QPAttr{State: QPStateRTR}, QPAttrState),
			modify(QPAttr{State: QPStateRTS, SQPSN: side.Local.PSN}, QPAttrState|QPAttrSQPSN),
			goverbsStep{"create_ah", func() (err error) {
				ah, err = pd.CreateAH(ahAttr)
				if err == nil {
					closers = append(closers, ah.Close)
				}
				return err
			}},
		)
	}
	// pp_close_ctx: the objects go in the tool's order (the comp channel and
	// the device are closed without a command).
	steps = append(steps,
		goverbsStep{"destroy_qp", func() error { return qp.Close() }},
		goverbsStep{"destroy_cq", func() error { return cq.Close() }},
		goverbsStep{"dereg_mr", func() error {
			if err := mr.Close(); err != nil {
				return err
			}
			return buf.Close()
		}},
	)
	if p.ud {
		steps = append(steps, goverbsStep{"destroy_ah", func() error { return ah.Close() }})
	}
	steps = append(steps, goverbsStep{"dealloc_pd", func() error { return pd.Close() }})

	var out []cmdView
	seen := 0
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("goverbs step %d (%s): %v", i+1, s.verb, err)
		}
		var buf bytes.Buffer
		if _, err := rec.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		xs, err := transport.ReadTranscript(&buf)
		if err != nil {
			t.Fatal(err)
		}
		// Every compared command the step sent counts, so extra or
		// missing ones show in the comparison of the verb sequences.
		for _, x := range xs[seen:] {
			verb := verbOf(x)
			if verb == "" {
				continue
			}
			if x.Errno != 0 {
				t.Fatalf("goverbs step %d (%s): %s failed with errno %d", i+1, s.verb, verb, x.Errno)
			}
			v, err := view(verb, x, nil)
			if err != nil {
				t.Fatalf("goverbs step %d (%s): %s: %v", i+1, s.verb, verb, err)
			}
			out = append(out, v)
		}
		seen = len(xs)
	}
	return out
}

func verbs(vs []cmdView) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Verb)
	}
	return out
}

// TestRDMACoreCommandBytes compares goverbs' command bytes with rdma-core's
// for the same verbs (see the top of this file).
func TestRDMACoreCommandBytes(t *testing.T) {
	shim := requireCaptureShim(t)
	tools := []struct {
		name, tool string
		params     pingpongParams
	}{
		{"RC", "ibv_rc_pingpong", pingpongParams{size: 4096, rxDepth: 100}},
		{"UD", "ibv_ud_pingpong", pingpongParams{ud: true, size: 1024, rxDepth: 100}},
	}
	modes := []struct {
		name    string
		noIoctl bool
		goverbs []Transport
	}{
		{"ioctl", false, []Transport{TransportIoctl, TransportAuto}},
		{"write", true, []Transport{TransportWrite}},
	}
	port := 18600
	for _, tool := range tools {
		for _, mode := range modes {
			port++
			t.Run(tool.name+"/rdma-core-"+mode.name, func(t *testing.T) {
				server, client := runPingpong(t, shim, tool.tool, port, tool.params.args(), mode.noIoctl)
				for _, side := range []*toolSide{server, client} {
					want := rdmaCoreCommands(t, side, mode.noIoctl)
					if side.Name == "client" {
						// The comparison must see a changed parameter:
						// goverbs with one more receive WR sends other
						// create_cq and create_qp bytes.
						t.Run(side.Name+"/goverbs-changed-rx-depth", func(t *testing.T) {
							changed := tool.params
							changed.rxDepth++
							got := mirror(t, changed, side, mode.goverbs[0])
							var differ []string
							for i := range want {
								if i < len(got) && !cmp.Equal(want[i], got[i]) {
									differ = append(differ, want[i].Verb)
								}
							}
							if diff := cmp.Diff([]string{"create_cq", "create_qp"}, differ); diff != "" {
								t.Errorf("commands that differ with rx depth %d instead of %d (-want +got):\n%s",
									changed.rxDepth, tool.params.rxDepth, diff)
							}
						})
					}
					for _, tr := range mode.goverbs {
						t.Run(side.Name+"/goverbs-"+tr.String(), func(t *testing.T) {
							got := mirror(t, tool.params, side, tr)
							if diff := cmp.Diff(verbs(want), verbs(got)); diff != "" {
								t.Fatalf("compared verbs in order (-rdma-core +goverbs):\n%s", diff)
							}
							for i := range want {
								if diff := cmp.Diff(want[i], got[i]); diff != "" {
									t.Errorf("command %d (%s) differs (-rdma-core +goverbs):\n%s", i+1, want[i].Verb, diff)
									continue
								}
								t.Logf("command %d %s: same bytes (%s)", i+1, want[i].Verb, summary(want[i]))
							}
						})
					}
				}
			})
		}
	}
}

// summary is a one-line account of a matched command for -v runs.
func summary(v cmdView) string {
	if v.Op == "write" {
		return "write: " + strings.Join(v.Fields, " ")
	}
	var parts []string
	for _, a := range v.Attrs {
		s := fmt.Sprintf("%d:%s/len%d/flags%d", a.ID, a.Kind, a.Len, a.Flags)
		if a.Value != "" {
			s += "=" + a.Value
		}
		if len(a.Fields) > 0 {
			s += "{" + strings.Join(a.Fields, " ") + "}"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("ioctl %d/%d: %s", v.Object, v.Method, strings.Join(parts, " "))
}

// TestUAPILayouts checks the hand-written UAPI layouts the comparison
// masks with: each covers exactly its structure's size.
func TestUAPILayouts(t *testing.T) {
	all := map[string]uapiStruct{qpCapStruct.name: qpCapStruct}
	for _, s := range writeStructs {
		all[s.name] = s
	}
	for name, s := range all {
		n := 0
		for _, fl := range s.fields {
			n += fl.size
		}
		if n != s.size {
			t.Errorf("%s: fields cover %d bytes, the structure has %d", name, n, s.size)
		}
	}
}

// TestViewMasksExactly flips every byte of each compared write structure
// and checks the comparison sees the change unless the byte belongs to a
// masked field (pointer, handle, user handle, fd).
func TestViewMasksExactly(t *testing.T) {
	for cmd, s := range writeStructs {
		t.Run(s.name, func(t *testing.T) {
			base := make([]byte, 8+s.size)
			binary.LittleEndian.PutUint32(base, cmd)
			binary.LittleEndian.PutUint16(base[4:], uint16(len(base)/4))
			for i := 8; i < len(base); i++ {
				base[i] = byte(i)
			}
			if cmd == 9 {
				// reg_mr as ibv_reg_mr sends it, hca_va = start: changing
				// either one byte then shows.
				copy(base[8+24:8+32], base[8+8:8+16])
			}
			render := func(b []byte) cmdView {
				t.Helper()
				v, err := view("x", transport.Exchange{Op: "write", Write: hex.EncodeToString(b)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			want := render(base)
			off := 8
			for _, fl := range s.fields {
				for i := off; i < off+fl.size; i++ {
					b := bytes.Clone(base)
					b[i] ^= 0x5a
					changed := !cmp.Equal(want, render(b))
					masked := fl.mask != noMask
					if fl.name == "start" || fl.name == "hca_va" {
						// Masked pointers, but whether they are equal shows.
						masked = false
					}
					if changed == masked {
						t.Errorf("%s byte %d (field %s): change seen %v, masked %v", s.name, i-8, fl.name, changed, masked)
					}
				}
				off += fl.size
			}
		})
	}
}

// TestViewMaskedFD: comp_channel -1 (no channel) is compared, an fd is not.
func TestViewMaskedFD(t *testing.T) {
	s := writeStructs[18]
	b := make([]byte, s.size)
	binary.LittleEndian.PutUint32(b[24:], 0xffffffff)
	none := fieldValues(s, b)
	binary.LittleEndian.PutUint32(b[24:], 7)
	fd := fieldValues(s, b)
	if cmp.Equal(none, fd) {
		t.Errorf("comp_channel -1 and an fd render alike: %v", none)
	}
}

func TestParsePingpongOutput(t *testing.T) {
	rc := "  local address:  LID 0x0000, QPN 0x000011, PSN 0xbf89b6, GID ::ffff:10.99.0.1\n" +
		"  remote address: LID 0x0001, QPN 0x000012, PSN 0x2939cd, GID ::ffff:10.99.0.2\n"
	local, remote, err := parsePingpongOutput(rc)
	if err != nil {
		t.Fatal(err)
	}
	wantRemote := pingpongDest{LID: 1, QPN: 0x12, PSN: 0x2939cd, GID: GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 2}}
	if diff := cmp.Diff(wantRemote, remote); diff != "" {
		t.Errorf("remote (-want +got):\n%s", diff)
	}
	if local.QPN != 0x11 || local.PSN != 0xbf89b6 {
		t.Errorf("local %+v", local)
	}
	// ud_pingpong prints its own line with a colon before GID.
	ud := "  local address:  LID 0x0000, QPN 0x000011, PSN 0x000001: GID ::ffff:10.99.0.2\n" +
		"  remote address: LID 0x0000, QPN 0x000011, PSN 0x000002, GID ::ffff:10.99.0.1\n"
	if local, _, err := parsePingpongOutput(ud); err != nil || local.PSN != 1 {
		t.Errorf("ud output: %+v, %v", local, err)
	}
	for _, bad := range []string{
		"",
		"  local address:  LID 0x0000, QPN 0x000011, PSN 0x000001, GID ::1\n",
		"  local address:  LID 0x0000, QPN 0x000011, PSN 0x000001, GID nonsense\n" +
			"  remote address: LID 0x0000, QPN 0x000011, PSN 0x000002, GID ::1\n",
		"  local address:  LID 0x10000, QPN 0x000011, PSN 0x000001, GID ::1\n" +
			"  remote address: LID 0x0000, QPN 0x000011, PSN 0x000002, GID ::1\n",
	} {
		if _, _, err := parsePingpongOutput(bad); err == nil {
			t.Errorf("parsePingpongOutput(%q) accepted", bad)
		}
	}
}

// TestViewIoctlMasks: in native ioctl methods only handles, fds and user
// handles are masked; every other attribute value and length is compared.
func TestViewIoctlMasks(t *testing.T) {
	createCQ := func(mut func(a []transport.AttrRecord)) cmdView {
		t.Helper()
		attrs := []transport.AttrRecord{
			{ID: 0, Kind: "idr-new", Flags: 1},
			{ID: 6, Kind: "ptr-out", Flags: 1, Len: 4},
			{ID: 1, Kind: "in", Flags: 1, Len: 4, Data: 101},
			{ID: 2, Kind: "in", Flags: 1, Len: 8, Data: 0x5555deadbeef},
			{ID: 3, Kind: "fd", Flags: 1, Data: 5},
			{ID: 4, Kind: "in", Flags: 1, Len: 4},
			{ID: 7, Kind: "fd", Data: 4},
			{ID: 0x1001, Kind: "ptr-out", Flags: 1, Len: 16},
		}
		mut(attrs)
		v, err := view("create_cq", transport.Exchange{Op: "ioctl", Object: 3, Method: 0, Driver: 14, Attrs: attrs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := createCQ(func([]transport.AttrRecord) {})
	for _, tc := range []struct {
		name string
		mut  func(a []transport.AttrRecord)
		seen bool
	}{
		{"user handle", func(a []transport.AttrRecord) { a[3].Data = 1 }, false},
		{"comp channel fd", func(a []transport.AttrRecord) { a[4].Data = 9 }, false},
		{"async event fd", func(a []transport.AttrRecord) { a[6].Data = 9 }, false},
		{"cqe", func(a []transport.AttrRecord) { a[2].Data = 102 }, true},
		{"comp vector", func(a []transport.AttrRecord) { a[5].Data = 1 }, true},
		{"event fd optional flag", func(a []transport.AttrRecord) { a[6].Flags = 1 }, true},
		{"udata out length", func(a []transport.AttrRecord) { a[7].Len = 24 }, true},
		{"order", func(a []transport.AttrRecord) { a[0], a[1] = a[1], a[0] }, true},
		{"new handle sent nonzero", func(a []transport.AttrRecord) { a[0].Data = 1 }, true},
	} {
		if got := !cmp.Equal(base, createCQ(tc.mut)); got != tc.seen {
			t.Errorf("%s: change seen %v, want %v", tc.name, got, tc.seen)
		}
	}
}
