package rdmacm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/uverbs"
)

// EventType is the kind of a connection manager event (enum
// rdma_cm_event_type).
type EventType uint32

// Events, in the kernel's numbering.
const (
	EventAddrResolved    EventType = abi.CMEventAddrResolved
	EventAddrError       EventType = abi.CMEventAddrError
	EventRouteResolved   EventType = abi.CMEventRouteResolved
	EventRouteError      EventType = abi.CMEventRouteError
	EventConnectRequest  EventType = abi.CMEventConnectRequest
	EventConnectResponse EventType = abi.CMEventConnectResponse
	EventConnectError    EventType = abi.CMEventConnectError
	EventUnreachable     EventType = abi.CMEventUnreachable
	EventRejected        EventType = abi.CMEventRejected
	EventEstablished     EventType = abi.CMEventEstablished
	EventDisconnected    EventType = abi.CMEventDisconnected
	EventDeviceRemoval   EventType = abi.CMEventDeviceRemoval
	EventMulticastJoin   EventType = abi.CMEventMulticastJoin
	EventMulticastError  EventType = abi.CMEventMulticastError
	EventAddrChange      EventType = abi.CMEventAddrChange
	EventTimewaitExit    EventType = abi.CMEventTimewaitExit
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST", "CONNECT_RESPONSE",
	"CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL",
	"MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT",
}

// String returns librdmacm's name of the event (rdma_event_str), e.g.
// "RDMA_CM_EVENT_ESTABLISHED".
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return "RDMA_CM_EVENT_" + eventNames[t]
	}
	return fmt.Sprintf("UNKNOWN EVENT %d", uint32(t))
}

// ECE is the enhanced connection establishment data an event carries.
type ECE struct {
	VendorID uint32
	AttrMod  uint32
}

// ConnParam holds the parameters of a connection: what Connect and Accept
// offer, and what CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED and
// REJECTED events report from the peer (as seen from the receiver: on a
// CONNECT_REQUEST, ResponderResources is the peer's initiator depth).
type ConnParam struct {
	// PrivateData travels with the request, reply or reject. Sent: at most
	// MaxPrivateData for the message. Received: the full fixed-length
	// field of the message, zero-padded (56 bytes for an RC request, 196
	// for a reply, 148 for a reject), so a protocol must encode its own
	// length.
	PrivateData []byte
	// ResponderResources is how many RDMA READ/atomic operations the peer
	// may have outstanding against this side; must be ≥ 1 for the peer to
	// read from this side's memory. 0xFF (MaxResources) means the device
	// maximum.
	ResponderResources uint8
	// InitiatorDepth is how many RDMA READ/atomic operations this side may
	// have outstanding. 0xFF (MaxResources) means the device maximum.
	InitiatorDepth uint8
	FlowControl    uint8
	// RetryCount is the transport retry count (0..7), RNRRetryCount the
	// receiver-not-ready retry count (0..7, 7 = forever). Soft-RoCE (rxe)
	// also takes a RetryCount of 7 as "retry for ever": a send to a peer
	// whose QP is gone then never completes in error, and the peer's
	// leaving shows only as a DISCONNECTED event on the ID.
	RetryCount    uint8
	RNRRetryCount uint8
	// SRQ says the QP receives from a shared receive queue.
	SRQ bool
	// QPNum is the local QP number to announce. Connect and Accept fill it
	// from the ID's QP when the ID has one (CreateQP or SetQP).
	QPNum uint32
	// QKey is the Q_Key (UD; AF_IB only on connect).
	QKey uint32
}

// MaxResources asks for the device maximum of ResponderResources or
// InitiatorDepth.
const MaxResources = 0xFF

// UDParam is what a UD ESTABLISHED or MULTICAST_JOIN event reports: the
// remote QP number and Q_Key to send to, and the address vector for an
// address handle (uverbs.PD.CreateAH).
type UDParam struct {
	QPNum uint32
	QKey  uint32
	AH    uverbs.AHAttr
}

// Event is one connection manager event, copied out of the kernel: holding
// it blocks nothing, and it needs no acknowledgement.
type Event struct {
	Type EventType
	// Status is the kernel's status: 0, a negative errno, the IB CM reject
	// reason of a REJECTED event, or the SIDR status of a UD UNREACHABLE.
	Status int
	// ID is the ID the event is for. For a CONNECT_REQUEST it is the new ID
	// of the incoming connection (accept or reject it); Listener is the
	// listening ID it arrived on.
	ID       *ID
	Listener *ID
	// Param is the peer's connection parameters and private data
	// (connected IDs and the private data of UD requests and replies).
	Param ConnParam
	// UD is set on the ESTABLISHED of a UD ID (SIDR reply) and on
	// MULTICAST_JOIN.
	UD *UDParam
	// Multicast is the membership a MULTICAST_JOIN or MULTICAST_ERROR is
	// about.
	Multicast *Multicast
	ECE       ECE
}

// Err returns the event's failure as an error, or nil for events that
// report success (ADDR_RESOLVED, ESTABLISHED, ...): a *RejectedError for
// REJECTED, errno errors for the error events, uverbs.ErrDeviceRemoved for
// DEVICE_REMOVAL.
func (e Event) Err() error { return eventErr(e) }

// rawEvent is a parsed rdma_ucm_event_resp.
type rawEvent struct {
	uid    uint64
	handle uint32
	typ    EventType
	status int32
	conn   ConnParam
	ud     UDParam
	udPriv []byte // private data of the UD view
	ece    ECE
}

// parseEvent decodes a GET_EVENT response. The kernel writes at least
// UCMMinEventResp bytes; shorter input is refused. The conn and UD views of
// the parameter union are both decoded; the caller picks by the ID's port
// space. Private data lengths are bounded by the buffer.
func parseEvent(b []byte) (rawEvent, error) {
	if len(b) < abi.UCMMinEventResp {
		return rawEvent{}, fmt.Errorf("rdmacm: event of %d bytes, want at least %d: %w", len(b), abi.UCMMinEventResp, unix.EINVAL)
	}
	var r abi.UCMEventResp
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), b)
	ev := rawEvent{uid: r.UID, handle: r.ID, typ: EventType(r.Event), status: r.Status,
		ece: ECE{r.ECE.VendorID, r.ECE.AttrMod}}
	c := (*abi.UCMConnParam)(unsafe.Pointer(&r.Param[0]))
	n := int(c.PrivateDataLen)
	ev.conn = ConnParam{
		ResponderResources: c.ResponderResources, InitiatorDepth: c.InitiatorDepth, FlowControl: c.FlowControl,
		RetryCount: c.RetryCount, RNRRetryCount: c.RNRRetryCount, SRQ: c.SRQ != 0, QPNum: c.QPNum & 0xFFFFFF,
		QKey: c.Qkey,
	}
	if n > 0 {
		ev.conn.PrivateData = append([]byte(nil), c.PrivateData[:n]...)
	}
	u := (*abi.UCMUDParam)(unsafe.Pointer(&r.Param[0]))
	ev.ud = UDParam{QPNum: u.QPNum, QKey: u.Qkey, AH: ahFromABI(&u.AHAttr)}
	if n := int(u.PrivateDataLen); n > 0 {
		ev.udPriv = append([]byte(nil), u.PrivateData[:n]...)
	}
	return ev, nil
}

func ahFromABI(a *abi.AHAttr) uverbs.AHAttr {
	return uverbs.AHAttr{
		GRH: uverbs.GlobalRoute{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: int(a.GRH.SGIDIndex),
			HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass},
		IsGlobal: a.IsGlobal != 0, DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate,
		PortNum: a.PortNum,
	}
}
