package templates

// Adaptive is the adaptive concurrency card: its rows, and the minutes
// their sparklines cover.
type Adaptive struct {
	Rows    []AdaptiveRow
	Minutes int
}

// AdaptiveRow is a group's adaptive concurrency (docs/limiting.md,
// "Adaptive concurrency") as the overview and the group page show it: now,
// and over the last minutes.
type AdaptiveRow struct {
	Group string
	// Limit and Inflight are now; Probing is true while the limit is pinned
	// at its minimum to measure the node's unloaded latency.
	Limit, Inflight int64
	Probing         bool
	// Latency is the last window's ("12.3 ms"), Unloaded the last
	// measurement's; "—" until there is one.
	Latency, Unloaded string
	// ShedRate is per second over the last minute ("2.5/s"), ShedPct its
	// share of the group's requests.
	ShedRate, ShedPct string
	// Mode is the group's: in dry_run nothing is shed, the counts are of
	// what would have been.
	Mode string
	// LimitSpark, LatencySpark and ShedSpark are the last minutes, a
	// point a minute: the limit and the latency at each minute's end, the
	// requests shed during it.
	LimitSpark, LatencySpark, ShedSpark Spark
}
