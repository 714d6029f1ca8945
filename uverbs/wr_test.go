package uverbs

import (
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/provider"
)

// sameLayout reports how u (uverbs' declaration) differs from p (the
// providers'): field names, offsets, sizes, alignments and kinds, through
// nested structs, slices and pointers.
func sameLayout(t *testing.T, path string, u, p reflect.Type) {
	t.Helper()
	if u.Size() != p.Size() || u.Align() != p.Align() || u.Kind() != p.Kind() {
		t.Errorf("%s: %v (size %d, align %d) and %v (size %d, align %d) differ", path, u, u.Size(), u.Align(), p, p.Size(), p.Align())
		return
	}
	switch u.Kind() {
	case reflect.Struct:
		if u.NumField() != p.NumField() {
			t.Errorf("%s: %d fields and %d", path, u.NumField(), p.NumField())
			return
		}
		for i := range u.NumField() {
			fu, fp := u.Field(i), p.Field(i)
			if fu.Name != fp.Name || fu.Offset != fp.Offset {
				t.Errorf("%s: field %d is %s at %d and %s at %d", path, i, fu.Name, fu.Offset, fp.Name, fp.Offset)
				continue
			}
			sameLayout(t, path+"."+fu.Name, fu.Type, fp.Type)
		}
	case reflect.Slice:
		sameLayout(t, path+"[]", u.Elem(), p.Elem())
	case reflect.Pointer:
		if u.Elem() == reflect.TypeFor[AH]() && p.Elem() == reflect.TypeFor[provider.AHRef]() {
			return // checked as a prefix in TestDataPathLayout
		}
		sameLayout(t, path+"*", u.Elem(), p.Elem())
	case reflect.Interface:
		if u != p {
			t.Errorf("%s: interfaces %v and %v", path, u, p)
		}
	}
}

// TestDataPathLayout: uverbs' data path types and the providers' are the
// same memory, so PostSend, PostRecv and Poll pass the caller's slices on
// without copying.
func TestDataPathLayout(t *testing.T) {
	for _, tc := range []struct{ u, p reflect.Type }{
		{reflect.TypeFor[SGE](), reflect.TypeFor[provider.SGE]()},
		{reflect.TypeFor[SendWR](), reflect.TypeFor[provider.SendWR]()},
		{reflect.TypeFor[RecvWR](), reflect.TypeFor[provider.RecvWR]()},
		{reflect.TypeFor[WC](), reflect.TypeFor[provider.WC]()},
		{reflect.TypeFor[BindMW](), reflect.TypeFor[provider.BindMW]()},
		{reflect.TypeFor[PostError](), reflect.TypeFor[provider.PostError]()},
	} {
		sameLayout(t, tc.u.Name(), tc.u, tc.p)
	}
	// A work request's *AH is read as a *provider.AHRef: AH must start
	// with the provider's half.
	ref := reflect.TypeFor[provider.AHRef]()
	ah := reflect.TypeFor[AH]()
	if ref.NumField() != 1 || ah.Field(0).Offset != 0 || ah.Field(0).Type != ref.Field(0).Type {
		t.Errorf("AH starts with %s %v, provider.AHRef is %v", ah.Field(0).Name, ah.Field(0).Type, ref)
	}
}

// TestDataPathConstants: every opcode, flag and status has the value the
// providers use.
func TestDataPathConstants(t *testing.T) {
	type pair struct{ u, p uint32 }
	for name, tc := range map[string]pair{
		"WRRDMAWrite": {uint32(WRRDMAWrite), uint32(provider.WRRDMAWrite)}, "WRRDMAWriteWithImm": {uint32(WRRDMAWriteWithImm), uint32(provider.WRRDMAWriteWithImm)},
		"WRSend": {uint32(WRSend), uint32(provider.WRSend)}, "WRSendWithImm": {uint32(WRSendWithImm), uint32(provider.WRSendWithImm)},
		"WRRDMARead": {uint32(WRRDMARead), uint32(provider.WRRDMARead)}, "WRAtomicCmpAndSwp": {uint32(WRAtomicCmpAndSwp), uint32(provider.WRAtomicCmpAndSwp)},
		"WRAtomicFetchAndAdd": {uint32(WRAtomicFetchAndAdd), uint32(provider.WRAtomicFetchAndAdd)}, "WRLocalInv": {uint32(WRLocalInv), uint32(provider.WRLocalInv)},
		"WRBindMW": {uint32(WRBindMW), uint32(provider.WRBindMW)}, "WRSendWithInv": {uint32(WRSendWithInv), uint32(provider.WRSendWithInv)},
		"SendFence": {uint32(SendFence), uint32(provider.SendFence)}, "SendSignaled": {uint32(SendSignaled), uint32(provider.SendSignaled)},
		"SendSolicited": {uint32(SendSolicited), uint32(provider.SendSolicited)}, "SendInline": {uint32(SendInline), uint32(provider.SendInline)},
		"SendIPCsum": {uint32(SendIPCsum), uint32(provider.SendIPCsum)},
		"WCSend":     {uint32(WCSend), uint32(provider.WCSend)}, "WCRDMAWrite": {uint32(WCRDMAWrite), uint32(provider.WCRDMAWrite)},
		"WCRDMARead": {uint32(WCRDMARead), uint32(provider.WCRDMARead)}, "WCCompSwap": {uint32(WCCompSwap), uint32(provider.WCCompSwap)},
		"WCFetchAdd": {uint32(WCFetchAdd), uint32(provider.WCFetchAdd)}, "WCBindMW": {uint32(WCBindMW), uint32(provider.WCBindMW)},
		"WCLocalInv": {uint32(WCLocalInv), uint32(provider.WCLocalInv)}, "WCTSO": {uint32(WCTSO), uint32(provider.WCTSO)},
		"WCRecv": {uint32(WCRecv), uint32(provider.WCRecv)}, "WCRecvRDMAWithImm": {uint32(WCRecvRDMAWithImm), uint32(provider.WCRecvRDMAWithImm)},
		"WCWithGRH": {uint32(WCWithGRH), uint32(provider.WCWithGRH)}, "WCWithImm": {uint32(WCWithImm), uint32(provider.WCWithImm)},
		"WCIPCSumOK": {uint32(WCIPCSumOK), uint32(provider.WCIPCSumOK)}, "WCWithInvalidate": {uint32(WCWithInvalidate), uint32(provider.WCWithInvalidate)},
		"WCSuccess": {uint32(WCSuccess), uint32(provider.WCSuccess)}, "WCLocLenErr": {uint32(WCLocLenErr), uint32(provider.WCLocLenErr)},
		"WCLocQPOpErr": {uint32(WCLocQPOpErr), uint32(provider.WCLocQPOpErr)}, "WCLocEECOpErr": {uint32(WCLocEECOpErr), uint32(provider.WCLocEECOpErr)},
		"WCLocProtErr": {uint32(WCLocProtErr), uint32(provider.WCLocProtErr)}, "WCWRFlushErr": {uint32(WCWRFlushErr), uint32(provider.WCWRFlushErr)},
		"WCMWBindErr": {uint32(WCMWBindErr), uint32(provider.WCMWBindErr)}, "WCBadRespErr": {uint32(WCBadRespErr), uint32(provider.WCBadRespErr)},
		"WCLocAccessErr": {uint32(WCLocAccessErr), uint32(provider.WCLocAccessErr)}, "WCRemInvReqErr": {uint32(WCRemInvReqErr), uint32(provider.WCRemInvReqErr)},
		"WCRemAccessErr": {uint32(WCRemAccessErr), uint32(provider.WCRemAccessErr)}, "WCRemOpErr": {uint32(WCRemOpErr), uint32(provider.WCRemOpErr)},
		"WCRetryExcErr": {uint32(WCRetryExcErr), uint32(provider.WCRetryExcErr)}, "WCRNRRetryExcErr": {uint32(WCRNRRetryExcErr), uint32(provider.WCRNRRetryExcErr)},
		"WCLocRDDViolErr": {uint32(WCLocRDDViolErr), uint32(provider.WCLocRDDViolErr)}, "WCRemInvRDReqErr": {uint32(WCRemInvRDReqErr), uint32(provider.WCRemInvRDReqErr)},
		"WCRemAbortErr": {uint32(WCRemAbortErr), uint32(provider.WCRemAbortErr)}, "WCInvEECNErr": {uint32(WCInvEECNErr), uint32(provider.WCInvEECNErr)},
		"WCInvEECStateErr": {uint32(WCInvEECStateErr), uint32(provider.WCInvEECStateErr)}, "WCFatalErr": {uint32(WCFatalErr), uint32(provider.WCFatalErr)},
		"WCRespTimeoutErr": {uint32(WCRespTimeoutErr), uint32(provider.WCRespTimeoutErr)}, "WCGeneralErr": {uint32(WCGeneralErr), uint32(provider.WCGeneralErr)},
	} {
		if tc.u != tc.p {
			t.Errorf("%s is %d in uverbs and %d in the providers", name, tc.u, tc.p)
		}
	}
}

func TestDataPathStrings(t *testing.T) {
	got := []string{WCSuccess.String(), WCWRFlushErr.String(), WCRemAccessErr.String(), WCTMRndvIncomplete.String(), WCStatus(99).String(),
		WRRDMAWrite.String(), WRSendWithInv.String(), WROpcode(42).String(),
		WCRecvRDMAWithImm.String(), WCFetchAdd.String(), WCOpcode(77).String(),
		(SendSignaled | SendInline).String(), SendFlags(0).String(), (WCWithImm | WCFlags(1<<9)).String()}
	want := []string{"success", "Work Request Flushed Error", "remote access error", "TM software rendezvous", "unknown",
		"rdma-write", "send-with-inv", "WROpcode(42)",
		"recv-rdma-with-imm", "fetch-add", "WCOpcode(77)",
		"SIGNALED|INLINE", "0", "WITH_IMM|0x200"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String() (-want +got):\n%s", diff)
	}
	// The providers' names (in their messages) are the same.
	for o := WRRDMAWrite; o <= WRSendWithInv+1; o++ {
		if o.String() != provider.WROpcode(o).String() {
			t.Errorf("WROpcode %d: %q here, %q in the providers", uint32(o), o.String(), provider.WROpcode(o).String())
		}
	}
	for s := WCSuccess; s <= WCGeneralErr; s++ {
		if s.String() != provider.WCStatus(s).String() {
			t.Errorf("WCStatus %d: %q here, %q in the providers", uint32(s), s.String(), provider.WCStatus(s).String())
		}
	}
	for s := WCSuccess; s <= WCTMRndvIncomplete; s++ {
		if s.String() == "unknown" {
			t.Errorf("WCStatus %d has no name", uint32(s))
		}
	}
}

func TestWCErr(t *testing.T) {
	ok := WC{ID: 1, Status: WCSuccess}
	if err := ok.Err(); err != nil {
		t.Fatalf("successful WC: Err() = %v", err)
	}
	bad := WC{ID: 7, QPNum: 0x11, Status: WCRemAccessErr, VendorErr: 0x88}
	err := bad.Err()
	if !errors.Is(err, WCRemAccessErr) || errors.Is(err, WCWRFlushErr) {
		t.Fatalf("errors.Is by status fails: %v", err)
	}
	var we *WCError
	if !errors.As(err, &we) || we.ID != 7 || we.Status != WCRemAccessErr {
		t.Fatalf("errors.As: %+v", we)
	}
	if want := "uverbs: work request 7 on QP 17: remote access error (vendor error 0x88)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

// TestPostErrorPublic: a provider's refusal reaches the caller as a
// *PostError of this package.
func TestPostErrorPublic(t *testing.T) {
	err := postErr(&provider.PostError{Index: 3, Err: provider.ErrQueueFull})
	var pe *PostError
	if !errors.As(err, &pe) || pe.Index != 3 || !errors.Is(err, ErrQueueFull) {
		t.Fatalf("postErr: %v (%T)", err, err)
	}
}
