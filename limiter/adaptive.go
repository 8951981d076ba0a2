package limiter

import "fmt"

// The keys of a group's adaptive concurrency (docs/limiting.md, "Adaptive
// concurrency").
const (
	KeyAdaptiveConcurrency   = "adaptive_concurrency"
	KeyAdaptiveAlgorithm     = "adaptive_algorithm"
	KeyAdaptiveMinLimit      = "adaptive_min_limit"
	KeyAdaptiveMaxLimit      = "adaptive_max_limit"
	KeyAdaptiveWindow        = "adaptive_window"
	KeyAdaptivePercentile    = "adaptive_percentile"
	KeyAdaptiveBuffer        = "adaptive_buffer"
	KeyAdaptiveSmoothing     = "adaptive_smoothing"
	KeyAdaptiveProbeInterval = "adaptive_probe_interval"
	KeyAdaptiveProbeSamples  = "adaptive_probe_samples"
)

// AdaptiveAlgorithm names the controller that sets a group's adaptive
// concurrency limit.
type AdaptiveAlgorithm uint8

// The adaptive algorithms.
const (
	// AdaptiveGradient is the gradient controller of Envoy's adaptive
	// concurrency filter: the limit follows (unloaded latency × (1 +
	// buffer)) / the window's latency, the unloaded latency measured now
	// and then at a pinned low concurrency (decision 200).
	AdaptiveGradient AdaptiveAlgorithm = iota
)

var adaptiveNames = []string{AdaptiveGradient: "gradient"}

// String returns the algorithm's configuration name.
func (a AdaptiveAlgorithm) String() string {
	return nameOf(adaptiveNames, int(a), "AdaptiveAlgorithm")
}

// MarshalText returns the algorithm's name, for JSON.
func (a AdaptiveAlgorithm) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// ParseAdaptiveAlgorithm parses "gradient".
func ParseAdaptiveAlgorithm(s string) (AdaptiveAlgorithm, error) {
	i, err := parseName(adaptiveNames, s, `"gradient"`)
	return AdaptiveAlgorithm(i), err
}

// Adaptive are the settings of a group's adaptive concurrency
// (docs/limiting.md, "Adaptive concurrency"), part of GroupSettings: a limit
// on the group's requests in flight over all its peers that follows the
// node's latency. With AdaptiveConcurrency false the others are not used;
// they may then be all zero (settings built in code), else Validate wants
// every one within its bounds, as it does when on (DefaultAdaptive has
// them all).
type Adaptive struct {
	// AdaptiveConcurrency turns it on.
	AdaptiveConcurrency bool `json:"adaptive_concurrency"`
	// AdaptiveAlgorithm is the controller.
	AdaptiveAlgorithm AdaptiveAlgorithm `json:"adaptive_algorithm"`
	// AdaptiveMinLimit and AdaptiveMaxLimit bound the limit; the limit is
	// pinned at AdaptiveMinLimit while the unloaded latency is measured.
	AdaptiveMinLimit int64 `json:"adaptive_min_limit"`
	AdaptiveMaxLimit int64 `json:"adaptive_max_limit"`
	// AdaptiveWindow is the ms between two updates of the limit: the
	// latencies of one window make one figure.
	AdaptiveWindow int64 `json:"adaptive_window"`
	// AdaptivePercentile is the percentile of a window's latencies (and
	// of a measurement's) that stands for it.
	AdaptivePercentile int64 `json:"adaptive_percentile"`
	// AdaptiveBuffer is how far above the unloaded latency, in percent, the
	// window's latency may lie before the limit shrinks.
	AdaptiveBuffer int64 `json:"adaptive_buffer"`
	// AdaptiveSmoothing is the share, in percent, of a window's step that
	// the limit takes (100: all of it).
	AdaptiveSmoothing int64 `json:"adaptive_smoothing"`
	// AdaptiveProbeInterval is the ms between two measurements of the
	// unloaded latency (each starts up to 15 % later, at random).
	AdaptiveProbeInterval int64 `json:"adaptive_probe_interval"`
	// AdaptiveProbeSamples is how many answers a measurement takes.
	AdaptiveProbeSamples int64 `json:"adaptive_probe_samples"`
}

// DefaultAdaptive returns the shipped adaptive settings, off: the limit
// between 3 and 1000, a window of 250 ms summed up by its median, a buffer
// of 25 %, 30 % of each step taken, the unloaded latency measured every
// minute on 50 answers (decisions 200 and 225).
func DefaultAdaptive() Adaptive {
	return Adaptive{
		AdaptiveAlgorithm:     AdaptiveGradient,
		AdaptiveMinLimit:      3,
		AdaptiveMaxLimit:      1000,
		AdaptiveWindow:        250,
		AdaptivePercentile:    50,
		AdaptiveBuffer:        25,
		AdaptiveSmoothing:     30,
		AdaptiveProbeInterval: 60_000,
		AdaptiveProbeSamples:  50,
	}
}

// The bounds of the adaptive keys.
const (
	minAdaptiveWindow   = 10
	maxAdaptiveWindow   = 60_000
	minProbeInterval    = 1000
	maxProbeSamples     = 10_000
	maxAdaptiveBuffer   = 100
	maxAdaptivePercents = 100
)

// validate checks the adaptive settings, on or off (a group switched on
// live must already be valid), unless they are off and all zero (settings
// built in code without them): every integer within its key's bounds, the
// minimum at most the maximum, a known algorithm. The error names the
// group and the key.
func (a Adaptive) validate(group string) error {
	if a.AdaptiveAlgorithm >= AdaptiveAlgorithm(len(adaptiveNames)) {
		return settingError(group, KeyAdaptiveAlgorithm, fmt.Sprintf("unknown adaptive algorithm %d", a.AdaptiveAlgorithm))
	}
	if a == (Adaptive{AdaptiveAlgorithm: a.AdaptiveAlgorithm}) {
		return nil
	}
	for _, k := range groupKeyTable {
		if k.Part != PartAdaptive || k.int == nil {
			continue
		}
		if v := *k.int(&GroupSettings{Adaptive: a}); v < k.Min || v > k.Max {
			return settingError(group, k.Name, fmt.Sprintf("must be an integer from %d to %d, got %d", k.Min, k.Max, v))
		}
	}
	if a.AdaptiveMinLimit > a.AdaptiveMaxLimit {
		return settingError(group, KeyAdaptiveMinLimit, fmt.Sprintf("must be at most %s (%d), got %d", KeyAdaptiveMaxLimit, a.AdaptiveMaxLimit, a.AdaptiveMinLimit))
	}
	return nil
}
