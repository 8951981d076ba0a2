package throttleclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/limiterd/limiterd/throttleclient"
)

// A node's HTTP client whose every request to a peer is paced by
// limiterd's outbound throttle: with throttle.mode = "adaptive", by the
// quota the peer's own replies announce (their ratelimit-* fields).
func ExampleTransport() {
	lc := throttleclient.New("http://127.0.0.1:1986", "the-admin-or-data-token")
	hc := &http.Client{Transport: &throttleclient.Transport{
		Client: lc,
		// The node names its peers "ip:port": the URL's host already is.
		Errors: func(err error) { fmt.Println("limiterd:", err) },
	}}
	resp, err := hc.Get("http://203.0.113.7:1984/data_sync_record")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
}

// Before each request to a peer, a node asks limiterd's outbound throttle
// whether it may go; Throttle returns when it may. When limiterd is not
// running (here: nothing listens on port 1), the client never stands in
// the node's way: Throttle returns nil at once.
func ExampleClient_Throttle() {
	lc := throttleclient.New("http://127.0.0.1:1", "the-admin-or-data-token")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lc.Throttle(ctx, "203.0.113.7:1984", "/chunk/123"); err != nil {
		fmt.Println("not sent:", err)
		return
	}
	fmt.Println("go")
	// Output: go
}
