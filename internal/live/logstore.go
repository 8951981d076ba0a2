package live

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// LoggedStore returns a Store that logs every change stored through s,
// once it is durable, as the audit log has it (docs/operations.md,
// "6. Logs": every live edit and switch is logged): one info line "live edit"
// with the actor, the action, the target, the old and new values and the note.
// Reads pass through. It is safe for concurrent use if s is.
func LoggedStore(s Store, log *slog.Logger) Store { return &loggedStore{Store: s, log: log} }

type loggedStore struct {
	Store
	log *slog.Logger
}

func (l *loggedStore) logged(a AuditEntry, err error) error {
	if err != nil {
		return err
	}
	attrs := []any{"actor", a.Actor, "action", a.Action, "target", a.Target}
	if a.Old != nil {
		attrs = append(attrs, "old", logValue{a.Old})
	}
	if a.New != nil {
		attrs = append(attrs, "new", logValue{a.New})
	}
	if a.Note != "" {
		attrs = append(attrs, "note", a.Note)
	}
	if !a.Expires.IsZero() {
		attrs = append(attrs, "expires", a.Expires)
	}
	l.log.Info("live edit", attrs...)
	return nil
}

func (l *loggedStore) SetOverride(ctx context.Context, group string, o Override, a AuditEntry) error {
	return l.logged(a, l.Store.SetOverride(ctx, group, o, a))
}

func (l *loggedStore) AddExemption(ctx context.Context, e Exemption, a AuditEntry) error {
	return l.logged(a, l.Store.AddExemption(ctx, e, a))
}

func (l *loggedStore) RemoveExemption(ctx context.Context, e Exemption, a AuditEntry) error {
	return l.logged(a, l.Store.RemoveExemption(ctx, e, a))
}

func (l *loggedStore) SetDisabled(ctx context.Context, disabled bool, a AuditEntry) error {
	return l.logged(a, l.Store.SetDisabled(ctx, disabled, a))
}

func (l *loggedStore) Record(ctx context.Context, a AuditEntry) error {
	return l.logged(a, l.Store.Record(ctx, a))
}

// logValue is an audit value in a log line: JSON in both handlers (an
// object in a JSON line, its compact text in a text line), rather than Go's
// map[...] syntax.
type logValue struct{ v any }

// MarshalJSON writes the value as JSON.
func (l logValue) MarshalJSON() ([]byte, error) { return json.Marshal(l.v) }

// MarshalText writes a string as it is, anything else as compact JSON.
func (l logValue) MarshalText() ([]byte, error) {
	if s, ok := l.v.(string); ok {
		return []byte(s), nil
	}
	b, err := json.Marshal(l.v)
	if err != nil {
		return []byte(fmt.Sprint(l.v)), nil
	}
	return b, nil
}
