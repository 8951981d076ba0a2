package limiter

// Value returns the value of key in s as a JSON-ready value.
func (s GroupSettings) Value(key string) (any, bool) {
	switch key {
	case KeySlidingWindowLimit:
		return s.SlidingWindowLimit, true
	case KeySlidingWindowDuration:
		return s.SlidingWindowDuration, true
	case KeyCleanupInterval:
		return s.CleanupInterval, true
	case KeyCleanupExpiry:
		return s.CleanupExpiry, true
	case KeyLeakyLimit:
		return s.LeakyLimit, true
	case KeyLeakyTickInterval:
		return s.LeakyTickInterval, true
	case KeyLeakyTickReduction:
		return s.LeakyTickReduction, true
	case KeyConcurrencyLimit:
		return s.ConcurrencyLimit, true
	case KeyManualReductionOff:
		return s.ManualReductionDisabled, true
	case KeyMode:
		return s.Mode.String(), true
	case KeyAlgorithm:
		return s.Algorithm.String(), true
	case KeyLimit:
		return s.Limit, true
	case KeyPeriod:
		return s.Period, true
	case KeyBurst:
		return s.Burst, true
	}
	return nil, false
}
