// Package v1alpha1 is the install.quantyroot.io/v1alpha1 API: the
// cluster-scoped Installation that asks the QuantyKube operator to move a
// cluster's datastore and node runtimes onto QuantyKube, or back.
//
// It lives at the module's top level (api/, not internal/) so that other Go
// programs — tests, tools, a future CLI plugin — can import the types; the
// CRD in deploy/ is generated from this package by scripts/generate.sh.
//
// +kubebuilder:object:generate=true
// +groupName=install.quantyroot.io
package v1alpha1
