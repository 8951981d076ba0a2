package api

import (
	"net/http"
	"time"
)

// Build is what the binary knows of its build (decision 123: from the Go build
// information, overridable with -ldflags -X).
type Build struct {
	// Version is the module version: a release tag, a pseudo-version, or
	// "(devel)" for a build in a checkout without a stamp.
	Version string `json:"version"`
	// Revision is the VCS revision ("" when the build did not record one).
	Revision string `json:"revision,omitempty"`
	// Modified is true when the checkout had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// CommitTime is the revision's commit time (RFC 3339), if known.
	CommitTime string `json:"commit_time,omitempty"`
	// BuildTime is when the binary was built, if stamped.
	BuildTime string `json:"build_time,omitempty"`
	// GoVersion is the toolchain's, runtime.Version().
	GoVersion string `json:"go_version"`
}

// DaemonInfo is the daemon's state GET /api/v1/limiter reports besides
// the switch, and the reload metrics' source (the admin listener's
// DaemonMetrics).
type DaemonInfo struct {
	// ConfigFile is the config file in use; "" for the embedded default.
	ConfigFile string
	// ConfigLoadedAt is when the config in force was loaded: at start or
	// by the last successful reload.
	ConfigLoadedAt time.Time
	// LastReloadAt is when a reload (SIGHUP) was last tried; zero when
	// none was.
	LastReloadAt time.Time
	// LastReloadError is why that reload was refused; "" when it
	// succeeded (or none was tried).
	LastReloadError string
	// StartedAt is when the daemon started serving.
	StartedAt time.Time
}

// limiterAnswer is GET /api/v1/limiter's body.
type limiterAnswer struct {
	Enabled bool         `json:"enabled"`
	Config  configAnswer `json:"config"`
	Version Build        `json:"version"`
	// StartedAt and UptimeSeconds say how long the daemon has served.
	StartedAt     *time.Time `json:"started_at,omitempty"`
	UptimeSeconds int64      `json:"uptime_seconds,omitempty"`
	// Token names the token of the request and its scope: what the caller
	// may do.
	Token tokenAnswer `json:"token"`
}

type configAnswer struct {
	File       string        `json:"file"`
	Embedded   bool          `json:"embedded"`
	LoadedAt   *time.Time    `json:"loaded_at,omitempty"`
	LastReload *reloadAnswer `json:"last_reload,omitempty"`
}

type reloadAnswer struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

type tokenAnswer struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

// utcPtr returns &t in UTC, or nil for the zero time.
func utcPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// handleLimiter answers GET /api/v1/limiter: the global switch, the config
// file in use and its load time, the last reload, the version, and who is
// asking.
func (a *API) handleLimiter(w http.ResponseWriter, r *http.Request) {
	var info DaemonInfo
	if a.opts.Daemon != nil {
		info = a.opts.Daemon()
	}
	name, scope := a.opts.Token(r)
	if name == "" {
		name = "admin"
	}
	ans := limiterAnswer{
		Enabled: a.lim.Enabled(),
		Config: configAnswer{
			File: info.ConfigFile, Embedded: info.ConfigFile == "",
			LoadedAt: utcPtr(info.ConfigLoadedAt),
		},
		Version:   a.opts.Build,
		StartedAt: utcPtr(info.StartedAt),
		Token:     tokenAnswer{Name: name, Scope: scope},
	}
	if !info.LastReloadAt.IsZero() {
		ans.Config.LastReload = &reloadAnswer{At: info.LastReloadAt.UTC(), OK: info.LastReloadError == "", Error: info.LastReloadError}
	}
	if !info.StartedAt.IsZero() {
		ans.UptimeSeconds = int64(a.now().Sub(info.StartedAt) / time.Second)
	}
	writeJSON(w, http.StatusOK, ans)
}
