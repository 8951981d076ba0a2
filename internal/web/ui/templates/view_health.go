package templates

// Health is the strip every page shows on top: the node's health and
// limiterd's own, each as a few items.
type Health struct {
	Node, Daemon []HealthItem
	// Bad is true when an item is red.
	Bad bool
}

// HealthItem is one figure of the health strip.
type HealthItem struct {
	// ID names the item for tests and links ("node", "5xx", "p99",
	// "reload", "snapshot"…).
	ID    string
	Label string
	Value string
	// State is "ok", "warn" or "bad" (red).
	State string
	// Title is the detail shown on hover ("" for none).
	Title string
	// Href links to where more is said ("" for none).
	Href string
}

// Problem is something wrong the overview leads with.
type Problem struct {
	// Bad is red; otherwise a warning.
	Bad bool
	// Instance is the instance concerned, in cluster mode.
	Instance    string
	Title, Text string
}

// Fleet is the overview's section on the instances sharing a Redis
// (cluster mode): the totals of the instances that are up, one row per
// instance.
type Fleet struct {
	Instances []InstanceRow
	Groups    []FleetGroup
	// ReadAt is when the others' summaries were read from Redis, Error
	// why they could not be.
	ReadAt Stamp
	Error  string
	// Window says what the rates cover.
	Window string
}

// InstanceRow is one instance of the fleet.
type InstanceRow struct {
	ID      string
	Self    bool
	Version string
	// Up is false for an instance whose summary is stale; Age says how
	// old it is.
	Up  bool
	Age string
	// Uptime says for how long it has served.
	Uptime                              string
	RequestRate, RejectRate, DeniedRate string
	RejectedPct                         string
	// Node says its node's health ("up · p99 80 ms"), NodeBad whether it
	// is red.
	Node    string
	NodeBad bool
	// Backend says whether it uses Redis, BackendBad whether it does not.
	Backend    string
	BackendBad bool
	// Clock warns of a clock off ("" when it is right); Config is its
	// configuration's fingerprint, Drift true when it is not this
	// instance's.
	Clock  string
	Config string
	Drift  bool
}

// FleetGroup is one group's rates summed over the fleet.
type FleetGroup struct {
	Name                                string
	RequestRate, RejectRate, DeniedRate string
	RejectedPct                         string
	Hot                                 bool
}
