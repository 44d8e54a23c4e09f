package staticpod

import "testing"

const apiserver = `apiVersion: v1
kind: Pod
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=10.0.0.2
    - --etcd-servers=https://127.0.0.1:2379
    - --secure-port=6443
`

func TestSetFlagChangesOneLine(t *testing.T) {
	if v, ok := Flag([]byte(apiserver), "etcd-servers"); !ok || v != "https://127.0.0.1:2379" {
		t.Fatalf("Flag = %q %v", v, ok)
	}
	out, err := SetFlag([]byte(apiserver), "etcd-servers", "https://127.0.0.1:2479")
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: v1
kind: Pod
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=10.0.0.2
    - --etcd-servers=https://127.0.0.1:2479
    - --secure-port=6443
`
	if string(out) != want {
		t.Fatalf("got\n%s", out)
	}
	if _, err := SetFlag([]byte(apiserver), "missing", "x"); err == nil {
		t.Fatal("set a missing flag")
	}
}
