package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Token is the admin token of every config the drivers write.
const Token = "chaos-admin-token-not-for-production"

// apiClient is the admin API's client: short timeouts, so that a killed
// daemon turns into an error at once.
var apiClient = &http.Client{Timeout: 10 * time.Second}

// API calls the admin API of base (http://host:port) with the admin token
// and returns the status and the decoded JSON body (nil when not JSON).
func API(base, method, path, body string) (int, map[string]any, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v, nil
}

// Metrics reads base's /metrics as series (name with labels, as the
// exposition writes it) to value.
func Metrics(base string) (map[string]float64, error) {
	resp, err := apiClient.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// Peer returns the admin API's entry of peer in group (GET
// /api/v1/peers/{peer}); found false on 404.
func Peer(base, peer, group string) (entry map[string]any, found bool, err error) {
	code, v, err := API(base, "GET", "/api/v1/peers/"+url.PathEscape(peer), "")
	if err != nil {
		return nil, false, err
	}
	if code == 404 {
		return nil, false, nil
	}
	if code != 200 {
		return nil, false, fmt.Errorf("GET /api/v1/peers/%s: %d %v", peer, code, v)
	}
	gs, _ := v["groups"].([]any)
	for _, g := range gs {
		if e, _ := g.(map[string]any); e["group"] == group {
			return e, true, nil
		}
	}
	return nil, false, nil
}

// num reads a JSON number field as int64.
func num(m map[string]any, k string) int64 {
	f, _ := m[k].(float64)
	return int64(f)
}

// jsonBody marshals v for a request body.
func jsonBody(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return b.String()
}
