package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/webtest"
)

// TestOverviewAPI: GET /api/v1/overview outside cluster mode is this
// instance alone: its id, version, health and rates, the busiest peer of
// the now window in top_rejected with its rate, and problems as a list;
// scope read may ask, data may not.
func TestOverviewAPI(t *testing.T) {
	o := webtest.NewOps(t)
	o.Dash.Clock.Add(10 * time.Second)
	code, body := o.Call(webtest.ReadToken, "GET", "/api/v1/overview", "")
	if code != http.StatusOK {
		t.Fatalf("read token: %d %s", code, body)
	}
	var v struct {
		Cluster   bool    `json:"cluster"`
		Window    float64 `json:"window_s"`
		Instances []struct {
			ID, Version string
			Self, Up    bool
			Node        struct{ Up bool }        `json:"node"`
			Daemon      struct{ Backend string } `json:"daemon"`
		} `json:"instances"`
		TopRejected []any `json:"top_rejected"`
		Problems    []any `json:"problems"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Cluster || len(v.Instances) != 1 || !v.Instances[0].Self || !v.Instances[0].Up || v.Instances[0].Version != "v1.2.3" ||
		!v.Instances[0].Node.Up || v.Instances[0].Daemon.Backend != "local" || v.TopRejected == nil || v.Problems == nil || v.Window <= 0 {
		t.Fatalf("overview %s", body)
	}
	if code, _ := o.Call(webtest.DataToken, "GET", "/api/v1/overview", ""); code != http.StatusForbidden {
		t.Fatalf("data token: %d", code)
	}
}
