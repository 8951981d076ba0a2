package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
)

// Edits makes live edits through the admin API and keeps the model of
// what the daemon must hold: the value of every (group, key) it patched
// and every exemption or deny entry it added or removed. An edit the API
// acknowledged (2xx) is certain; one whose answer never came (the daemon
// was killed) may or may not have been stored, and the next Verify
// accepts either and adopts what it finds. Safe for concurrent use.
type Edits struct {
	mu    sync.Mutex
	rng   *rand.Rand
	next  int
	acked int
	// groups[group][key]: the values the daemon may hold (one value:
	// certain), noOverride for none.
	groups map[string]map[string][]int64
	// entries["kind value"]: present or not, or both when uncertain.
	entries map[string][]bool
	added   []string // entries believed present, for removals
}

// noOverride stands for a key without a live override.
const noOverride = -1

// editGroups are the groups Edits patches (never general, which the load
// and the probe run in).
var editGroups = []string{"chunk", "data_sync_record", "recent_hash_list_diff", "block_index", "wallet_list", "get_vdf"}

// editKeys are the keys it patches, with their ranges.
var editKeys = []struct {
	name     string
	min, max int64
}{{"leaky_limit", 1, 100000}, {"concurrency_limit", 1, 5000}, {"sliding_window_limit", 0, 1000}}

// NewEdits returns an empty model with a seeded randomness.
func NewEdits(seed uint64) *Edits {
	return &Edits{rng: rand.New(rand.NewPCG(seed, 18)), groups: map[string]map[string][]int64{}, entries: map[string][]bool{}}
}

// Acked returns the number of edits the API acknowledged.
func (e *Edits) Acked() int { e.mu.Lock(); defer e.mu.Unlock(); return e.acked }

// One makes one random edit on admin: a group patch, an exemption or deny
// entry added, or one removed. It returns an error only for an answer
// that is neither 2xx nor a lost connection (a refusal of a valid edit).
func (e *Edits) One(admin string) error {
	e.mu.Lock()
	op := e.rng.IntN(3)
	if op == 2 && len(e.added) == 0 {
		op = 1
	}
	var method, path, body, ek string
	var g string
	var k string
	var v int64
	switch op {
	case 0:
		g = editGroups[e.rng.IntN(len(editGroups))]
		key := editKeys[e.rng.IntN(len(editKeys))]
		k, v = key.name, key.min+e.rng.Int64N(key.max-key.min+1)
		method, path, body = "PATCH", "/api/v1/groups/"+g, jsonBody(map[string]int64{k: v})
	case 1:
		e.next++
		kind := []string{"exempt_peer", "deny_peer"}[e.rng.IntN(2)]
		value := fmt.Sprintf("100.%d.%d.%d", 64+e.next>>16&63, e.next>>8&255, e.next&255)
		ek = kind + " " + value
		method, path, body = "POST", "/api/v1/exemptions", jsonBody(map[string]string{"kind": kind, "value": value, "note": "chaos"})
	case 2:
		i := e.rng.IntN(len(e.added))
		ek = e.added[i]
		e.added = slices.Delete(e.added, i, i+1)
		kind, value, _ := strings.Cut(ek, " ")
		method, path, body = "DELETE", "/api/v1/exemptions", jsonBody(map[string]string{"kind": kind, "value": value})
	}
	e.mu.Unlock()

	code, resp, err := API(admin, method, path, body)
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := err == nil && code/100 == 2
	if err == nil && !ok {
		return fmt.Errorf("%s %s %s: %d %v", method, path, strings.TrimSpace(body), code, resp)
	}
	if ok {
		e.acked++
	}
	switch op {
	case 0:
		if e.groups[g] == nil {
			e.groups[g] = map[string][]int64{}
		}
		switch was, seen := e.groups[g][k]; {
		case ok:
			e.groups[g][k] = []int64{v}
		case seen:
			e.groups[g][k] = append(was, v)
		default:
			e.groups[g][k] = []int64{noOverride, v}
		}
	case 1:
		if ok {
			e.entries[ek] = []bool{true}
		} else {
			e.entries[ek] = []bool{true, false}
		}
		e.added = append(e.added, ek)
	case 2:
		if ok {
			e.entries[ek] = []bool{false}
		} else {
			e.entries[ek] = []bool{false, true}
		}
	}
	return nil
}

// Verify reads every edited group and the exemptions from admin and
// returns the acknowledged edits that are missing; uncertain ones are
// resolved to what it found.
func (e *Edits) Verify(admin string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var lost []string
	for g, keys := range e.groups {
		code, v, err := API(admin, "GET", "/api/v1/groups/"+g, "")
		if err != nil || code != 200 {
			return nil, fmt.Errorf("GET /api/v1/groups/%s: %d %v", g, code, err)
		}
		over, _ := v["override"].(map[string]any)
		for k, want := range keys {
			got := int64(noOverride)
			if f, has := over[k].(float64); has {
				got = int64(f)
			}
			if slices.Contains(want, got) {
				keys[k] = []int64{got}
			} else {
				lost = append(lost, fmt.Sprintf("%s.%s: one of %v acknowledged or attempted, found %v", g, k, want, over[k]))
			}
		}
	}
	code, v, err := API(admin, "GET", "/api/v1/exemptions", "")
	if err != nil || code != 200 {
		return nil, fmt.Errorf("GET /api/v1/exemptions: %d %v", code, err)
	}
	have := map[string]bool{}
	list, _ := v["exemptions"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		have[fmt.Sprint(m["kind"], " ", m["value"])] = true
	}
	for ek, want := range e.entries {
		got := have[ek]
		if slices.Contains(want, got) {
			e.entries[ek] = []bool{got}
		} else {
			lost = append(lost, fmt.Sprintf("%s: present %v acknowledged, found %v", ek, want[0], got))
		}
		present := slices.Contains(e.added, ek)
		if got && !present {
			e.added = append(e.added, ek)
		} else if !got && present {
			e.added = slices.DeleteFunc(e.added, func(s string) bool { return s == ek })
		}
	}
	return lost, nil
}
