package templates

import "net/url"

// Overview is the data of the overview page and its live partial.
type Overview struct {
	Enabled bool
	Now     Stamp
	// Window says what the top lists and the groups' rates cover ("the
	// last 25 s, of a 30 s window…"), WindowSeconds exactly.
	Window        string
	WindowSeconds float64
	// Estimate is set when the counts are estimated from a sample of the
	// decisions ("estimated from 1 in 8 decisions").
	Estimate string
	// TopRejected and TopRequests answer "who is hammering me now".
	TopRejected, TopRequests []TalkerRow
	// Groups is each group's traffic over the now window.
	Groups []GroupNow
	// Totals are the counters since the daemon started.
	Totals []GroupRow
	// Tracked is the number of tracked (peer, group) entries.
	Tracked int
	// Cluster says where the limits live (cluster mode, docs/cluster.md), and
	// ClusterUp whether that is as configured.
	Cluster   string
	ClusterUp bool
	// Adaptive is the groups' adaptive concurrency, when any has it on.
	Adaptive Adaptive
	// Problems are what is wrong, red first: the page leads with them.
	Problems []Problem
	// ClusterMode is true when the top lists are the fleet's; Fleet is
	// then the fleet's section.
	ClusterMode bool
	Fleet       *Fleet
}

// TalkerRow is one (peer, group) of a top list.
type TalkerRow struct {
	Peer, Group string
	// RequestRate and RejectRate are per second ("12.5/s").
	RequestRate, RejectRate string
	// RequestPerSec and RejectPerSec are the rates unformatted, for the
	// cells' data-value (tests, scripts).
	RequestPerSec, RejectPerSec float64
	// RejectedPct is the share of its requests rejected ("83 %").
	RejectedPct string
	// Instances are the instances that count it among their top (cluster
	// mode).
	Instances string
}

// GroupNow is one group's traffic over the now window.
type GroupNow struct {
	Name, Mode string
	// Rates are per second; RejectedPct the share of requests rejected
	// (would be, in dry run).
	RequestRate, RejectRate, DeniedRate, RejectedPct string
	// RequestPerSec, RejectPerSec and DeniedPerSec are the rates
	// unformatted, for the cells' data-value.
	RequestPerSec, RejectPerSec, DeniedPerSec float64
	// Hot is true when it rejects more than a tenth of its requests.
	Hot bool
	// Editable is true for a configured group (local_peers is not).
	Editable bool
	Inflight int64
	Spark    Spark
}

// GroupLive is a group page's traffic now.
type GroupLive struct {
	Name string
	// Window says what the rates cover.
	Window string
	// Here is this instance's rates; Fleet the fleet's (cluster mode).
	Here  GroupNow
	Fleet *GroupNow
	// Top are its (peer, group)s with the most rejections now.
	Top     []TalkerRow
	Cluster bool
	// HistoryURL is the JSON of its last hour, for the chart.
	HistoryURL string
}

// Spark is a sparkline as SVG polylines in a Width × Height box.
type Spark struct {
	Width, Height int
	// Requests and Rejected are polyline points ("0,20 4,18 …").
	Requests, Rejected string
	// Label says what it shows, for screen readers and on hover.
	Label string
	// Idle is true when there was no request at all.
	Idle bool
}

// GroupSummary is one group's row on the groups page.
type GroupSummary struct {
	Name, Mode, Algorithm string
	// Rule is the limits of an algorithm other than the hybrid ("600 per
	// 60000 ms, burst 50"), whose keys are not among the Cells.
	Rule  string
	Cells []SummaryCell
	// Overrides counts its live edits.
	Overrides int
}

// URL is the group's edit page.
func (g GroupSummary) URL() string { return GroupURL(g.Name) }

// GroupURL is the address of a group's edit page.
func GroupURL(name string) string { return "/groups/" + url.PathEscape(name) }

// SummaryCell is one key's value in a group's row.
type SummaryCell struct {
	Key, Value string
	// File is the config.toml value, shown when Overridden.
	File       string
	Overridden bool
	// Unused is true when the group's algorithm does not read the key.
	Unused bool
}

// Groups is the data of the groups page.
type Groups struct {
	// Columns are the keys of the table, in order, and their headers.
	Columns []SummaryColumn
	Rows    []GroupSummary
}

// SummaryColumn is a column of the groups table.
type SummaryColumn struct{ Key, Title, Unit string }

// WhatIf is what the last hour's requests of a group would have met
// under another value: the replay's rejections against today's.
type WhatIf struct {
	// Key and Value are the change ("leaky_limit", "10"); Key is empty
	// for several changes together.
	Key, Value string
	// Error says why no answer can be given (a bad value, a key the
	// replay cannot judge).
	Error string
	// Requests, Now and Then are the requests replayed, the rejections
	// under the current values and under the change (scaled to every
	// peer when sampled).
	Requests, Now, Then int64
	// Text is the answer in words.
	Text string
	// Note qualifies it (a sample, a short record).
	Note string
}

// OffenseRow is one (peer, group) of the record of offenders.
type OffenseRow struct {
	Peer, Group string
	Rejections  uint64
	First, Last Stamp
}

// Offenders is the data of the offenders page.
type Offenders struct {
	Rows []OffenseRow
	// Total is how many (peer, group)s the record holds; Kept is false
	// when the daemon keeps no record.
	Total int
	Kept  bool
}
