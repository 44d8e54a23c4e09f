package mvcc

import "errors"

// Errors returned by the store. The etcd API layer maps each to the gRPC
// status etcd itself returns (go.etcd.io/etcd/api/v3/v3rpc/rpctypes), so
// clients recognise them.
var (
	ErrCompacted     = errors.New("mvcc: required revision has been compacted")
	ErrFutureRev     = errors.New("mvcc: required revision is a future revision")
	ErrKeyNotFound   = errors.New("etcdserver: key not found")
	ErrLeaseNotFound = errors.New("lease not found")
	ErrLeaseExists   = errors.New("lease already exists")
	ErrLeaseTTLLarge = errors.New("too large lease TTL")
	ErrDuplicateKey  = errors.New("etcdserver: duplicate key given in txn request")
	ErrEmptyKey      = errors.New("etcdserver: key is not provided")
	ErrClosed        = errors.New("mvcc: store is closed")
	// ErrFailed is returned by every write after the engine failed to commit;
	// the process must restart and recover from disk.
	ErrFailed = errors.New("mvcc: storage engine failed; restart the store")
	// ErrReplicated refuses a local-only write (an import) on a replicated
	// member: imports go into a single member, which then grows.
	ErrReplicated = errors.New("mvcc: a replicated member takes writes through raft only; import into a single member and grow it with member add")
	// ErrUnknownRequest is returned for a replicated request the store does
	// not evaluate (auth, alarms, versions).
	ErrUnknownRequest = errors.New("mvcc: unsupported replicated request")
)
