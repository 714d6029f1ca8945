package transport

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/goverbs/goverbs/internal/abi"
)

var objectNames = map[uint16]string{
	abi.ObjectDevice: "DEVICE", abi.ObjectPD: "PD", abi.ObjectCompChannel: "COMP_CHANNEL",
	abi.ObjectCQ: "CQ", abi.ObjectQP: "QP", abi.ObjectSRQ: "SRQ", abi.ObjectAH: "AH",
	abi.ObjectMR: "MR", abi.ObjectMW: "MW", abi.ObjectFlow: "FLOW", abi.ObjectXRCD: "XRCD",
	abi.ObjectRWQIndTbl: "RWQ_IND_TBL", abi.ObjectWQ: "WQ", abi.ObjectFlowAction: "FLOW_ACTION",
	abi.ObjectDM: "DM", abi.ObjectCounters: "COUNTERS", abi.ObjectAsyncEvent: "ASYNC_EVENT",
}

// traceOut receives the trace; tests swap it.
var traceOut io.Writer = os.Stderr

func objectName(id uint16) string {
	if n, ok := objectNames[id]; ok {
		return n
	}
	return fmt.Sprintf("%#x", id)
}

func errnoText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func traceIoctl(verb, path string, q *Ioctl, err error, d time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "goverbs: %s %s obj=%s method=%d attrs=[", path, verb, objectName(q.Object), q.Method)
	for i := 0; i < q.n; i++ {
		a := q.w.attrs[i]
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%#x:%s", a.AttrID, q.kinds[i])
		switch q.kinds[i] {
		case kindInline, kindIDR, kindFD, kindIDRNew, kindFDNew:
			fmt.Fprintf(&b, "=%#x", a.Data)
		default:
			fmt.Fprintf(&b, "(%dB)", a.Len)
		}
	}
	fmt.Fprintf(&b, "] -> %s (%v)\n", errnoText(err), d)
	io.WriteString(traceOut, b.String())
}

func traceWrite(verb string, w *Write, err error, d time.Duration) {
	fmt.Fprintf(traceOut, "goverbs: write %s cmd=%#x in=%dB out=%dB -> %s (%v)\n",
		verb, w.Cmd, len(w.In), len(w.Out), errnoText(err), d)
}
