package storemove

import pb "go.etcd.io/etcd/api/v3/etcdserverpb"

// countAll is a count-only range over every key at rev.
func countAll(rev int64) *pb.RangeRequest {
	return &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev, CountOnly: true}
}
