package memory

import (
	"reflect"
	"unsafe"
)

// EntrySize is the size of one tracked (peer, group) entry, for tests.
const EntrySize = unsafe.Sizeof(entry{})

// SetAfterScan makes SnapshotDelta call f between its scan and its drain
// of deletions.
func SetAfterScan(b *Backend, f func()) { b.afterScan = f }

// EntryHoldsPointers reports whether an entry has a field the garbage
// collector must scan.
func EntryHoldsPointers() bool { return holdsPointers(reflect.TypeOf(entry{})) }

func holdsPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && holdsPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}
