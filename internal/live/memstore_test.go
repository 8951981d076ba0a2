package live

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// MemoryStore is a Store that keeps everything in process memory: live
// edits last until the process ends. It is safe for concurrent use.
type MemoryStore struct {
	mu    sync.Mutex
	state LiveState
	audit []AuditEntry
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{state: LiveState{Overrides: map[string]Override{}}}
}

// LoadLive implements Store.
func (m *MemoryStore) LoadLive(context.Context) (LiveState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return LiveState{
		Overrides:  maps.Clone(m.state.Overrides),
		Exemptions: slices.Clone(m.state.Exemptions),
		Disabled:   m.state.Disabled,
	}, nil
}

func (m *MemoryStore) record(a AuditEntry) {
	a.ID = uint64(len(m.audit)) + 1
	m.audit = append(m.audit, a)
}

// SetOverride implements Store.
func (m *MemoryStore) SetOverride(_ context.Context, group string, o Override, a AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o == nil {
		delete(m.state.Overrides, group)
	} else {
		m.state.Overrides[group] = maps.Clone(o)
	}
	m.record(a)
	return nil
}

// AddExemption implements Store.
func (m *MemoryStore) AddExemption(_ context.Context, e Exemption, a AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.Exemptions = append(m.state.Exemptions, e)
	m.record(a)
	return nil
}

// RemoveExemption implements Store.
func (m *MemoryStore) RemoveExemption(_ context.Context, e Exemption, a AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.Exemptions = slices.DeleteFunc(m.state.Exemptions, func(x Exemption) bool { return x.Kind == e.Kind && x.Value == e.Value })
	m.record(a)
	return nil
}

// SetDisabled implements Store.
func (m *MemoryStore) SetDisabled(_ context.Context, disabled bool, a AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state.Disabled = disabled
	m.record(a)
	return nil
}

// Record implements Store.
func (m *MemoryStore) Record(_ context.Context, a AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(a)
	return nil
}

// Audit implements Store.
func (m *MemoryStore) Audit(_ context.Context, limit int, before uint64) ([]AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []AuditEntry
	for i := len(m.audit) - 1; i >= 0 && len(out) < limit; i-- {
		if before == 0 || m.audit[i].ID < before {
			out = append(out, m.audit[i])
		}
	}
	return out, nil
}
