package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/limiterd/limiterd/internal/live"
	"github.com/limiterd/limiterd/internal/web/api"
	"github.com/limiterd/limiterd/limiter"
)

// daemonState is what GET /api/v1/limiter and the reload metrics report
// of the daemon: its config file, loads and reloads. Safe for concurrent
// use (its own lock: a scrape never waits for a reload).
type daemonState struct {
	mu   sync.Mutex
	info api.DaemonInfo
}

func (d *daemonState) get() api.DaemonInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// loaded notes a successful load (the start) of file.
func (d *daemonState) loaded(file string, at time.Time) {
	d.mu.Lock()
	d.info.ConfigFile, d.info.ConfigLoadedAt = file, at
	d.mu.Unlock()
}

// started notes when the daemon began serving.
func (d *daemonState) started(at time.Time) {
	d.mu.Lock()
	d.info.StartedAt = at
	d.mu.Unlock()
}

// reloaded notes a reload's outcome.
func (d *daemonState) reloaded(at time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.info.LastReloadAt, d.info.LastReloadError = at, ""
	if err != nil {
		d.info.LastReloadError = strings.ReplaceAll(err.Error(), "\n", "; ")
		return
	}
	d.info.ConfigLoadedAt = at
}

// hangup handles one SIGHUP: systemd hears RELOADING=1 then READY=1
// around the reload, whose outcome is logged and kept for the API and the
// metrics. A refused reload keeps the running config.
func (m *Main) hangup() {
	m.notify.reloading()
	err := m.Reload()
	m.state.reloaded(time.Now(), err)
	if err != nil {
		m.log.Error("reload refused: keeping the running config", "err", strings.ReplaceAll(err.Error(), "\n", "; "))
	} else {
		m.log.Info("config reloaded")
	}
	m.notify.ready("serving")
}

// shadowed is a key whose file value a reload changed while a live
// override keeps it out of effect.
type shadowed struct {
	group, key           string
	oldFile, newFile, in any
}

// shadowedKeys compares the groups' file values before a reload (views,
// with their overrides) with the reloaded ones, and returns each key the
// file changed that an override shadows, in group and key order.
func shadowedKeys(views []live.GroupView, next map[string]limiter.GroupSettings) []shadowed {
	var out []shadowed
	for _, v := range views {
		gs, ok := next[v.Name]
		if !ok || len(v.Override) == 0 {
			continue
		}
		nv := live.Values(gs)
		for _, k := range v.Override.Keys() {
			if fmt.Sprint(v.File[k]) != fmt.Sprint(nv[k]) {
				out = append(out, shadowed{group: v.Name, key: k, oldFile: v.File[k], newFile: nv[k], in: v.Override[k]})
			}
		}
	}
	slices.SortFunc(out, func(a, b shadowed) int {
		return strings.Compare(a.group+"."+a.key, b.group+"."+b.key)
	})
	return out
}

// logShadowed says, key by key, which file values of a reload do not take
// effect because a live edit overrides them.
func (m *Main) logShadowed(views []live.GroupView, next map[string]limiter.GroupSettings) {
	for _, s := range shadowedKeys(views, next) {
		m.log.Warn("reload: a live override keeps this file value out of effect (DELETE /api/v1/groups/{group}/overrides to use the file's)",
			"group", s.group, "key", s.key, "file_was", s.oldFile, "file_now", s.newFile, "override", s.in)
	}
}

// absPath is path made absolute, for the API; "" stays "".
func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
