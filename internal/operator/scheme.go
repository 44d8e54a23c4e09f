package operator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// Scheme is the client-go scheme plus install.quantyroot.io/v1alpha1.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register client-go types: %w", err)
	}
	if err := v1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register %s: %w", v1.GroupVersion, err)
	}
	return s, nil
}
