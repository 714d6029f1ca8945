package rsocket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testvm/vmenv"
)

// TestHTTPVM serves net/http over rsockets: a POST of 64 MiB is hashed by
// the server, and a GET of 64 MiB is hashed by the client; both compared.
// Once per kernel: the transfer runs on the provider's rings, not through
// the verbs transport, whose commands (connection set-up and teardown)
// TestCopyVM and TestManyConnsVM make in both passes.
func TestHTTPVM(t *testing.T) {
	requireVM(t)
	vmenv.OncePerKernel(t)
	const size = 64 << 20
	ctx := testCtx(t, 5*time.Minute)
	l, err := Listen(ctx, vmenv.AddrA+":0")
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, size)
	rand.New(rand.NewSource(2)).Read(body)
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			h := sha256.New()
			if _, err := io.Copy(h, r.Body); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			io.WriteString(w, hex.EncodeToString(h.Sum(nil)))
		case http.MethodGet:
			w.Write(body)
		}
	})}
	go srv.Serve(l)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return fromB.Dial(ctx, addr)
		}}}
	defer client.CloseIdleConnections()
	url := "http://" + l.Addr().String() + "/"
	resp, err := client.Post(url, "application/octet-stream", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != want {
		t.Fatalf("POST: server hashed %q (%v), want %s", got, err, want)
	}
	resp, err = client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || hex.EncodeToString(h.Sum(nil)) != want {
		t.Fatalf("GET: %d bytes, sha256 %x (%v), want %d bytes, %s", n, h.Sum(nil), err, size, want)
	}
}
