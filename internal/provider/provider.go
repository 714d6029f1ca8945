// Package provider is the contract between the uverbs core and the
// vendor providers (provider/rxe, provider/mlx5): what a provider adds to
// each command as driver data, and the registry that picks one by driver ID.
//
// Providers know nothing of each other and nothing of package uverbs; uverbs
// knows providers only through these interfaces.
package provider

import (
	"fmt"
	"sync"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/transport"
)

// Provider is the user-space half of one kernel RDMA driver.
type Provider interface {
	// Name is the provider's short name, e.g. "rxe".
	Name() string
	// DriverID is the kernel's enum rdma_driver_id value for the driver.
	DriverID() abi.DriverID
	// ABIVersions is the range of the driver's uverbs ABI
	// (/sys/class/infiniband_verbs/uverbsN/abi_version) the provider speaks.
	ABIVersions() (min, max int)
	// MatchName reports whether an IB device name belongs to the driver, for
	// kernels that do not report the driver ID over netlink.
	MatchName(ibdev string) bool
	// NewContext starts the provider's state for a new device context.
	NewContext(dev Device) (Context, error)
}

// Device describes the device a context is opened on.
type Device struct {
	Name       string // IB device name, e.g. "rxe0"
	ABIVersion int    // the driver's uverbs ABI version
}

// Context is a provider's per-context state.
type Context interface {
	// GetContextData returns the driver request of GET_CONTEXT and a buffer
	// for the driver response (either may be empty).
	GetContextData() (in, out []byte)
	// Started runs once GET_CONTEXT has succeeded and the response buffer
	// is filled; the provider may send its own commands on conn.
	Started(conn *transport.Conn) error
	// FirmwareVersion formats the raw fw_ver of QUERY_DEVICE the way the
	// provider's libibverbs counterpart does.
	FirmwareVersion(raw uint64) string
	// Close releases the provider's resources (mappings, driver objects).
	Close() error
}

var (
	mu        sync.RWMutex
	providers = map[abi.DriverID]Provider{}
)

// Register makes a provider available; providers call it from init.
func Register(p Provider) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := providers[p.DriverID()]; dup {
		panic(fmt.Sprintf("provider: driver %d registered twice", p.DriverID()))
	}
	providers[p.DriverID()] = p
}

// Lookup returns the provider for a driver ID.
func Lookup(id abi.DriverID) (Provider, bool) {
	mu.RLock()
	defer mu.RUnlock()
	p, ok := providers[id]
	return p, ok
}

// MatchName returns the provider claiming an IB device name, the fallback
// for kernels whose netlink does not report the driver ID.
func MatchName(ibdev string) (Provider, bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, p := range providers {
		if p.MatchName(ibdev) {
			return p, true
		}
	}
	return nil, false
}

// Known maps the drivers goverbs has a provider for to the package that
// implements it, so a missing import can be named in the error.
var Known = map[abi.DriverID]struct{ Name, Import string }{
	abi.DriverRXE:  {"rxe", "github.com/goverbs/goverbs/provider/rxe"},
	abi.DriverMLX5: {"mlx5", "github.com/goverbs/goverbs/provider/mlx5"},
}

// DriverName returns the kernel's name for a driver ID, for messages.
func DriverName(id abi.DriverID) string {
	names := map[abi.DriverID]string{
		abi.DriverMLX5: "mlx5", abi.DriverMLX4: "mlx4", abi.DriverCXGB3: "cxgb3", abi.DriverCXGB4: "cxgb4",
		abi.DriverMTHCA: "mthca", abi.DriverBNXTRE: "bnxt_re", abi.DriverOCRDMA: "ocrdma", abi.DriverNES: "nes",
		abi.DriverIRDMA: "irdma", abi.DriverVMWPVRDMA: "vmw_pvrdma", abi.DriverQEDR: "qedr", abi.DriverHNS: "hns",
		abi.DriverUSNIC: "usnic", abi.DriverRXE: "rxe", abi.DriverHFI1: "hfi1", abi.DriverQIB: "qib",
		abi.DriverEFA: "efa", abi.DriverSIW: "siw", abi.DriverERDMA: "erdma", abi.DriverMANA: "mana",
	}
	if n, ok := names[id]; ok {
		return n
	}
	return fmt.Sprintf("driver %d", uint32(id))
}

// CQContext is implemented by provider contexts that support completion
// queues.
type CQContext interface {
	// NewCQ prepares a CQ of at least cqe entries: the provider allocates
	// what the kernel needs to see (mlx5: the ring and doorbell record) and
	// returns the driver data to send.
	NewCQ(cqe int) (CQ, error)
}

// CQ is a provider's half of a completion queue.
type CQ interface {
	// CreateData returns the CREATE_CQ driver request and a buffer for the
	// driver response.
	CreateData() (in, out []byte)
	// Created runs once the kernel created the CQ (cqe: the capacity it
	// granted); rxe maps the kernel's queue here.
	Created(conn *transport.Conn, handle uint32, cqe int) error
	// Destroyed releases the provider's resources after the kernel
	// destroyed the CQ, or after a failed create.
	Destroyed() error
}

// QPType is a queue pair transport (IB_UVERBS_QPT_*).
type QPType uint8

// QPInit is what a provider needs to know to prepare a QP.
type QPInit struct {
	Type          QPType
	MaxSendWr     uint32
	MaxRecvWr     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	HasSRQ        bool
	SQSigAll      bool
	// SingleThreaded: the user posts to the QP from one goroutine at a
	// time, so the provider may leave the data path's locks out (a
	// provider that has none, or cannot, ignores it).
	SingleThreaded bool
	// The provider halves of the QP's CQs and SRQ (SRQ nil without one):
	// mlx5 links its queues to them so that completions find their work
	// requests.
	SendCQ CQ
	RecvCQ CQ
	SRQ    SRQ
}

// SingleThreadedCQ is implemented by provider CQs that can leave their
// data path's lock out when the user polls, arms and acknowledges events
// from one goroutine at a time. SetSingleThreaded is called once, after
// NewCQ and before the CQ is used or shared; it reports whether the lock
// is gone.
type SingleThreadedCQ interface {
	SetSingleThreaded() bool
}

// QPContext is implemented by provider contexts that support queue pairs.
type QPContext interface {
	// NewQP prepares a QP; the provider may refuse a type it does not
	// support with an error matching transport.ErrNotSupported.
	NewQP(init QPInit) (QP, error)
}

// QP is a provider's half of a queue pair.
type QP interface {
	// CreateData returns the CREATE_QP driver request and a buffer for the
	// driver response.
	CreateData() (in, out []byte)
	// Created runs once the kernel created the QP with the capabilities it
	// granted; rxe maps the kernel's queues here.
	Created(conn *transport.Conn, handle, qpn uint32, caps QPInit) error
	// Destroyed releases the provider's resources after the kernel
	// destroyed the QP, or after a failed create.
	Destroyed() error
}

// QPStateFollower is implemented by provider QPs whose own state follows
// the QP's: mlx5 starts its queues over when the QP is moved to RESET and
// withholds a raw packet QP's receive doorbell until RTR, as libmlx5's
// mlx5_modify_qp does. uverbs calls StateChanged after every MODIFY_QP
// that set the state and succeeded, with the new state (enum
// ibv_qp_state: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 SQD, 5 SQE, 6 ERR),
// before the data path sees that state.
type QPStateFollower interface {
	StateChanged(state uint8)
}

// SRQContext is implemented by provider contexts that support shared
// receive queues.
type SRQContext interface {
	NewSRQ(maxWr, maxSGE uint32) (SRQ, error)
}

// SRQType is a shared receive queue's kind (IB_UVERBS_SRQT_*).
type SRQType uint8

// SRQInit is what a provider needs to know to prepare an SRQ.
type SRQInit struct {
	Type   SRQType // abi.SRQTypeBasic or abi.SRQTypeXRC
	MaxWr  uint32
	MaxSGE uint32
	// CQ is the provider half of the CQ an XRC SRQ's completions go to
	// (nil for a basic SRQ, whose completions go to its QPs' CQs).
	CQ CQ
}

// SRQTypeContext is implemented by provider contexts that create SRQs of
// more than the basic type. uverbs prefers it to SRQContext; without it,
// only basic SRQs are created. A provider refuses a type it does not
// support with an error matching transport.ErrNotSupported.
type SRQTypeContext interface {
	NewTypedSRQ(init SRQInit) (SRQ, error)
}

// SRQ is a provider's half of a shared receive queue.
type SRQ interface {
	// CreateData returns the CREATE_SRQ driver request and a buffer for the
	// driver response.
	CreateData() (in, out []byte)
	// Created runs once the kernel created the SRQ.
	Created(conn *transport.Conn, handle uint32, maxWr, maxSGE uint32) error
	// ModifyData returns the MODIFY_SRQ driver request (rxe: where the
	// kernel writes the new queue's mmap info after a resize).
	ModifyData() []byte
	// Modified runs after a successful MODIFY_SRQ; resized reports a
	// changed max_wr.
	Modified(conn *transport.Conn, resized bool) error
	// Destroyed releases the provider's resources.
	Destroyed() error
}

// SRQModifier is implemented by provider SRQs that must keep posters off
// the queue while MODIFY_SRQ runs (rxe: a resize copies the posted receives
// into a new ring, so one posted into the old ring meanwhile would be
// lost). uverbs prefers it to ModifyData and Modified: send runs the
// command with the driver request drv; resized reports a changed max_wr.
type SRQModifier interface {
	Modify(conn *transport.Conn, resized bool, send func(drv []byte) error) error
}

// AHContext is implemented by provider contexts that support address
// handles.
type AHContext interface {
	NewAH() (AH, error)
}

// AH is a provider's half of an address handle.
type AH interface {
	// CreateData returns the CREATE_AH driver request and a buffer for the
	// driver response.
	CreateData() (in, out []byte)
	// Created runs once the kernel created the AH.
	Created(handle uint32) error
	// Destroyed runs once the kernel destroyed the AH: work requests must
	// no longer name it.
	Destroyed()
}

// AHAddress is what a provider needs to build an address vector itself.
type AHAddress struct {
	Attr abi.AHAttr
	// Ethernet: the port's link layer is Ethernet (RoCE).
	Ethernet bool
	// RoCEv2: the source GID (Attr.GRH.SGIDIndex) is a RoCE v2 GID, whose
	// packets are UDP encapsulated.
	RoCEv2 bool
}

// AHAddresser is implemented by provider AHs that build the address vector
// of UD work requests themselves (mlx5); it runs before CreateData.
type AHAddresser interface {
	SetAddress(a AHAddress) error
}

// CQResizer is implemented by provider CQs that can be resized.
type CQResizer interface {
	// Resize calls send with the RESIZE_CQ driver request and response
	// buffers and adopts the queue the kernel made, keeping pollers off the
	// CQ from before the command until the new queue is in place (the
	// kernel moves the unpolled completions to the new queue).
	Resize(conn *transport.Conn, send func(in, out []byte) (cqe int, err error)) error
}

// CQSizedResizer is implemented by provider CQs that must know the size
// asked for before the command: mlx5 allocates the new ring the driver
// data names. uverbs prefers it to CQResizer; the contract is the same.
type CQSizedResizer interface {
	ResizeTo(conn *transport.Conn, cqe int, send func(in, out []byte) (cqe int, err error)) error
}
