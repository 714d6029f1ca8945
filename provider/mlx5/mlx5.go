// Package mlx5 is the goverbs provider for NVIDIA ConnectX adapters (the
// kernel's mlx5_ib driver).
//
// The data path runs without system calls: work requests are written into
// queue buffers the process allocated and registered with the kernel at
// creation, and the HCA is told through a doorbell record in memory and a
// write into a mapped UAR page (a doorbell, or a BlueFlame copy of the whole
// WQE). What is written is checked byte for byte against rdma-core's
// libmlx5 (testdata/libmlx5); nothing here has run on mlx5 hardware.
package mlx5

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/abi"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
)

func init() { provider.Register(mlx5Provider{}) }

type mlx5Provider struct{}

func (mlx5Provider) Name() string            { return "mlx5" }
func (mlx5Provider) DriverID() abi.DriverID  { return abi.DriverMLX5 }
func (mlx5Provider) ABIVersions() (int, int) { return abi.MLX5ABIVersion, abi.MLX5ABIVersion }
func (mlx5Provider) MatchName(ibdev string) bool {
	return strings.HasPrefix(ibdev, "mlx5_")
}

func (mlx5Provider) NewContext(provider.Device) (provider.Context, error) {
	return newContext(os.Getpagesize()), nil
}

// Context is the mlx5 provider's per-context state: the GET_CONTEXT
// exchange, the UAR pages, doorbell records, and the user indexes that
// CQE version 1 completions carry.
type Context struct {
	req  abi.MLX5AllocUcontextReqV2
	resp abi.MLX5AllocUcontextResp

	pageSize    int
	ops         kernelOps
	totUUARs    int // libmlx5's tot_uuars: requested, or the kernel's static count
	lowLatUUARs int

	cacheLine      int
	bfRegSize      int
	numUARsPerPage int
	maxSQDescSz    int
	maxRQDescSz    int
	maxSendWQEBB   uint32
	maxRecvWr      uint32
	maxSRQRecvWr   uint32
	cqeVersion     uint8
	ethMinInline   int // inline Ethernet header bytes a raw packet WQE carries
	eceSupported   bool
	noKernDynUAR   bool // static UARs only (tot_bfregs in the response)
	atomics        bool
	preferBF       bool // libmlx5's MLX5_POST_SEND_PREFER_BF, on unless set to 0
	scatterToCQE   bool // libmlx5's MLX5_SCATTER_TO_CQE, on unless set to 0

	dbrecs   *dbAllocator
	allocBuf func(size, pageSize int) (queueBuffer, error)

	uarMu           sync.Mutex
	staticUARs      []*uarPage
	bfs             []*bfreg // static BlueFlame registers by index
	dynUARs         []*uarPage
	ncUAR           *uarPage
	ncBfreg         *bfreg
	dedicatedBfregs []*bfreg // free dedicated registers
	sharedBfregs    []*bfreg
	allocDedicated  int
	allocShared     int
	maxDedicated    int
	maxShared       int

	coreClock    []byte // the HCA's free-running clock page (read only), if offered
	coreClockOff int
	clockInfo    []byte // the kernel's clock info page, if offered

	uidxMu sync.Mutex
	uidx   map[uint32]bool // user indexes in use

	life lifetime
}

// lifetime closes the data path when the context closes: a doorbell
// through an unmapped UAR would fault, so no UAR write may start after
// Close began nor still run when it unmaps.
//
// The send path, which is hot, takes no lock of the context's: a send
// queue posts under its own mutex and checks its own closed flag there;
// Close sets every live send queue's flag under that queue's mutex, so a
// post either finished its doorbell before Close got the mutex or sees
// the flag after. The cold paths that write a UAR (arming a CQ) hold mu
// for reading across the write instead. The receive paths write no UAR:
// they only report ErrClosed, from the closed flag.
type lifetime struct {
	mu     sync.RWMutex // Close holds it for writing while it sets closed
	closed atomic.Bool

	sqMu sync.Mutex // guards sqs; taken before any sendQueue.mu
	sqs  map[*sendQueue]struct{}
}

// addSQ makes Close shut a send queue; one added after Close starts out
// shut.
func (l *lifetime) addSQ(sq *sendQueue) {
	l.sqMu.Lock()
	defer l.sqMu.Unlock()
	if l.closed.Load() {
		sq.mu.LockExcl()
		sq.closed = true
		sq.mu.UnlockExcl()
		return
	}
	if l.sqs == nil {
		l.sqs = map[*sendQueue]struct{}{}
	}
	l.sqs[sq] = struct{}{}
}

// removeSQ forgets a send queue being destroyed.
func (l *lifetime) removeSQ(sq *sendQueue) {
	l.sqMu.Lock()
	delete(l.sqs, sq)
	l.sqMu.Unlock()
}

// close shuts the data path: when it returns no post or arm is writing a
// UAR (nor a clock read reading the clock page) and none will.
func (l *lifetime) close() {
	l.mu.Lock()
	l.closed.Store(true)
	l.mu.Unlock()
	l.sqMu.Lock()
	defer l.sqMu.Unlock()
	for sq := range l.sqs {
		sq.mu.LockExcl()
		sq.closed = true
		sq.mu.UnlockExcl()
	}
}

// newContext prepares the GET_CONTEXT request libmlx5 sends by default:
// tot_uuars from the page size (get_total_uuars), 4 low-latency bfregs,
// CQE version 1, 4K and dynamic UARs.
func newContext(pageSize int) *Context {
	c := &Context{pageSize: pageSize, allocBuf: allocQueueBuffer, atomics: true,
		// libmlx5's environment knobs that change what is written.
		preferBF:     os.Getenv("MLX5_POST_SEND_PREFER_BF") != "0",
		scatterToCQE: os.Getenv("MLX5_SCATTER_TO_CQE") != "0",
	}
	tot := max(pageSize/abi.MLX5AdapterPageSize*abi.MLX5NumNonFPBfregsUAR, abi.MLX5DefaultTotalUUARs)
	tot = alignUp(tot, abi.MLX5NumNonFPBfregsUAR)
	c.totUUARs = tot
	c.lowLatUUARs = max(4, tot-abi.MLX5MedBfregsThreshold)
	c.req = abi.MLX5AllocUcontextReqV2{
		TotalNumBfregs:      uint32(tot),
		NumLowLatencyBfregs: uint32(c.lowLatUUARs),
		MaxCQEVersion:       abi.MLX5CQEVersionV1,
		LibCaps:             abi.MLX5LibCap4KUAR | abi.MLX5LibCapDynUAR,
	}
	return c
}

// GetContextData implements provider.Context.
func (c *Context) GetContextData() (in, out []byte) {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c.req)), unsafe.Sizeof(c.req)),
		unsafe.Slice((*byte)(unsafe.Pointer(&c.resp)), unsafe.Sizeof(c.resp))
}

// Started implements provider.Context: it maps the UARs and clock pages
// the response offers.
func (c *Context) Started(conn *transport.Conn) error {
	c.ops = fileOps{conn}
	return c.setup()
}

// setup adopts the GET_CONTEXT response, as libmlx5's mlx5_set_context.
func (c *Context) setup() error {
	r := &c.resp
	if r.CQEVersion > abi.MLX5CQEVersionV1 {
		return fmt.Errorf("mlx5: the kernel chose CQE version %d; libmlx5 and goverbs know 0 and 1: %w", r.CQEVersion, transport.ErrNotSupported)
	}
	c.cqeVersion = r.CQEVersion
	c.cacheLine = int(r.CacheLineSize)
	c.bfRegSize = int(r.BfRegSize)
	c.maxSQDescSz = int(r.MaxSQDescSz)
	c.maxRQDescSz = int(r.MaxRQDescSz)
	c.maxSendWQEBB = r.MaxSendWqebb
	c.maxRecvWr = r.MaxRecvWr
	c.maxSRQRecvWr = r.MaxSRQRecvWr
	c.eceSupported = r.CompMask&abi.MLX5UctxRespECE != 0
	c.numUARsPerPage = 1
	if r.LogUARSize != 0 || r.NumUARsPerPage != 0 {
		c.numUARsPerPage = int(r.NumUARsPerPage)
		if c.numUARsPerPage < 1 || c.numUARsPerPage*abi.MLX5AdapterPageSize > c.pageSize {
			return fmt.Errorf("mlx5: the kernel reports %d UARs per %d-byte page", r.NumUARsPerPage, c.pageSize)
		}
	}
	if c.bfRegSize < 0 || c.bfRegSize > abi.MLX5AdapterPageSize/2-abi.MLX5BFOffset/2 {
		return fmt.Errorf("mlx5: the kernel reports BlueFlame registers of %d bytes", r.BfRegSize)
	}
	switch r.EthMinInline {
	case abi.MLX5UserInlineModeNA:
		c.ethMinInline = abi.MLX5EthL2InlineHeaderSize
	case abi.MLX5UserInlineModeNone:
		c.ethMinInline = 0
	default:
		c.ethMinInline = abi.MLX5EthL2InlineHeaderSize
	}
	c.dbrecs = newDBAllocator(c.pageSize, c.cacheLine)
	c.dbrecs.allocPage = c.allocBuf
	c.maxDedicated = c.lowLatUUARs
	c.maxShared = c.totUUARs - c.lowLatUUARs
	if r.TotBfregs != 0 {
		c.noKernDynUAR = true
		c.totUUARs = int(r.TotBfregs)
		if c.totUUARs > abi.MLX5MaxBfregs || c.totUUARs%(c.numUARsPerPage*abi.MLX5NumNonFPBfregsUAR) != 0 {
			return fmt.Errorf("mlx5: the kernel reports %d static bfregs", r.TotBfregs)
		}
		if err := c.mapStaticUARs(); err != nil {
			c.unmapAll()
			return err
		}
	}
	if r.CompMask&abi.MLX5UctxRespCoreClockOffset != 0 {
		c.coreClockOff = int(r.HCACoreClockOffset & uint64(c.pageSize-1))
		off := abi.MLX5MmapOffset(abi.MLX5MmapCoreClock, 0, c.pageSize)
		if mem, err := c.ops.mmap(off, c.pageSize, unix.PROT_READ); err == nil && len(mem) >= c.coreClockOff+8 {
			c.coreClock = mem
		} // as libmlx5: a clock page that does not map leaves timestamps unconverted
	}
	if r.ClockInfoVersions&(1<<abi.MLX5ClockInfoV1) != 0 {
		off := abi.MLX5MmapOffset(abi.MLX5MmapClockInfo, abi.MLX5ClockInfoV1, c.pageSize)
		if mem, err := c.ops.mmap(off, c.pageSize, unix.PROT_READ); err == nil {
			c.clockInfo = mem
		}
	}
	c.setNCUAR()
	return nil
}

// HCACoreClock reads the device's free-running clock from the page the
// kernel maps (the two halves are read high, low, high, as libmlx5 does,
// until the high half is stable). ok is false when the kernel offers no
// clock page, or once the context closed (Close unmaps the page).
func (c *Context) HCACoreClock() (cycles uint64, ok bool) {
	c.life.mu.RLock()
	defer c.life.mu.RUnlock()
	if c.life.closed.Load() || c.coreClock == nil {
		return 0, false
	}
	p := unsafe.Pointer(&c.coreClock[c.coreClockOff])
	for {
		hi := readBE32(p)
		lo := readBE32(unsafe.Add(p, 4))
		if hi2 := readBE32(p); hi2 == hi {
			return uint64(hi)<<32 | uint64(lo), true
		}
	}
}

// PageSize is the system page size queue buffers are aligned to.
func (c *Context) PageSize() int { return c.pageSize }

// CQEVersion is the CQE format the kernel chose (1: CQEs carry the user
// index of their QP or SRQ).
func (c *Context) CQEVersion() uint8 { return c.cqeVersion }

// allocUIdx reserves the lowest free user index (libmlx5's
// mlx5_store_uidx), which CQE version 1 completions carry.
func (c *Context) allocUIdx() (uint32, error) {
	c.uidxMu.Lock()
	defer c.uidxMu.Unlock()
	if c.uidx == nil {
		c.uidx = map[uint32]bool{}
	}
	for i := uint32(0); i < 1<<24; i++ {
		if !c.uidx[i] {
			c.uidx[i] = true
			return i, nil
		}
	}
	return 0, errors.New("mlx5: no free user index")
}

func (c *Context) freeUIdx(i uint32) {
	c.uidxMu.Lock()
	delete(c.uidx, i)
	c.uidxMu.Unlock()
}

// Close implements provider.Context: no doorbell rings after it.
func (c *Context) Close() error {
	c.life.close()
	return c.unmapAll()
}

func (c *Context) unmapAll() error {
	c.uarMu.Lock()
	defer c.uarMu.Unlock()
	var errs []error
	for _, u := range append(c.staticUARs, c.dynUARs...) {
		if c.ops != nil && u.mem != nil {
			errs = append(errs, c.ops.munmap(u.mem))
		}
		if u.dyn && c.ops != nil {
			errs = append(errs, c.ops.destroyUAR(u.handle))
		}
	}
	c.staticUARs, c.dynUARs, c.bfs, c.ncUAR, c.ncBfreg = nil, nil, nil, nil, nil
	c.dedicatedBfregs, c.sharedBfregs = nil, nil
	for _, m := range [][]byte{c.coreClock, c.clockInfo} {
		if m != nil && c.ops != nil {
			errs = append(errs, c.ops.munmap(m))
		}
	}
	c.coreClock, c.clockInfo = nil, nil
	return errors.Join(errs...)
}

// FirmwareVersion formats fw_ver as libmlx5 does: major.minor.%04d.
func (*Context) FirmwareVersion(raw uint64) string {
	return fmt.Sprintf("%d.%d.%04d", (raw>>32)&0xffff, (raw>>16)&0xffff, raw&0xffff)
}
