package server

import "sync"

// idLocks serializes the verbs that change one sandbox or container (stop, remove,
// start, update): kubelet may retry a verb while the first call still runs. Locks are
// taken by the public CRI methods only; sandbox locks may be held while container locks
// are taken, never the reverse.
type idLocks struct{ m sync.Map }

func (l *idLocks) lock(id string) func() {
	v, _ := l.m.LoadOrStore(id, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// forget drops id's lock after the object is removed (waiters see it gone and return).
func (l *idLocks) forget(id string) { l.m.Delete(id) }
