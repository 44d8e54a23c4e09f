package operator

import (
	"os"
	"slices"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// TestCRDEnumsCoverWhatTheOperatorWrites: the generated CRD validates
// status.step, status.nodes[].state, status.phase and status.store against
// enums; a value the operator writes that is missing there would make every
// status write of that pass fail. Each one it can write must be listed.
func TestCRDEnumsCoverWhatTheOperatorWrites(t *testing.T) {
	data, err := os.ReadFile("../../deploy/generated/crd/install.quantyroot.io_installations.yaml")
	if err != nil {
		t.Fatalf("%v (run scripts/generate.sh)", err)
	}
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	node := status.Properties["nodes"].Items.Schema

	steps := append([]v1.Step{v1.StepStore, v1.StepDone, v1.StepRollback, v1.StepRollbackWait}, nodeSteps...)
	nodeStates := []v1.NodeState{v1.NodeStatePending, v1.NodeStateMoved, v1.NodeStateUndone, v1.NodeStateFailed, v1.StepRollback.NodeState()}
	for _, s := range nodeSteps {
		nodeStates = append(nodeStates, s.NodeState())
	}
	phases := []v1.Phase{v1.PhasePending, v1.PhaseMoving, v1.PhaseMoved, v1.PhaseUndoing, v1.PhaseUndone, v1.PhaseFailed}
	for _, tc := range []struct {
		field  string
		schema apiextv1.JSONSchemaProps
		want   []string
	}{
		{"status.step", status.Properties["step"], names(steps)},
		{"status.nodes[].state", node.Properties["state"], names(nodeStates)},
		{"status.phase", status.Properties["phase"], names(phases)},
		{"status.store", status.Properties["store"], names(phases)},
	} {
		var enum []string
		for _, e := range tc.schema.Enum {
			var s string
			if err := yaml.Unmarshal(e.Raw, &s); err != nil {
				t.Fatalf("%s: enum value %s: %v", tc.field, e.Raw, err)
			}
			enum = append(enum, s)
		}
		for _, w := range tc.want {
			if !slices.Contains(enum, w) {
				t.Errorf("%s: the CRD's enum %v lacks %q, which the operator writes; fix the kubebuilder marker and run scripts/generate.sh", tc.field, enum, w)
			}
		}
		if len(enum) != len(tc.want) {
			t.Errorf("%s: the CRD's enum %v lists values the operator never writes (want %v)", tc.field, enum, tc.want)
		}
	}
}

func names[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
