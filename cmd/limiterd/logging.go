package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/limiterd/limiterd/internal/config"
	"github.com/limiterd/limiterd/internal/insight"
)

// newLogger returns the daemon's logger as [log] says: text or JSON
// (log/slog) to w, at the level level holds (a reload changes it).
func newLogger(w io.Writer, lc config.Log, level *slog.LevelVar) *slog.Logger {
	level.Set(parseLevel(lc.Level))
	opts := &slog.HandlerOptions{Level: level}
	if lc.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// parseLevel reads [log].level, which config validated: debug, info,
// warn or error.
func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// rejectMode reads [log].rejections, which config validated.
func rejectMode(s string) insight.RejectLogMode {
	m, ok := insight.ParseRejectLogMode(s)
	if !ok {
		return insight.RejectLogSampled
	}
	return m
}

// applyLog applies a reloaded [log] table: the level and the rejections
// at once; the format only on restart (the handler is built at start;
// Reload says so, as for every such key).
func (m *Main) applyLog(old, lc config.Log) {
	if lc.Level != old.Level {
		// Said at the more verbose of the two levels, so that it shows.
		from, to := parseLevel(old.Level), parseLevel(lc.Level)
		if to < from {
			m.level.Set(to)
		}
		m.log.Log(context.Background(), min(from, to), "log level changed", "from", old.Level, "to", lc.Level)
		m.level.Set(to)
	}
	if lc.Rejections != old.Rejections {
		m.rejects.SetMode(rejectMode(lc.Rejections))
		m.log.Info("logging of rejections changed", "from", old.Rejections, "to", lc.Rejections)
	}
}
