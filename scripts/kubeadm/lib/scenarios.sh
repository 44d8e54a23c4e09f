# shellcheck shell=bash
# scenarios.sh: placeholders for the scenarios later issues fill in. Each
# says what it will do and exits 2, so nothing mistakes it for a pass.

cmd_scenario() {
	case $1 in
	e2e) echo "e2e: not yet. It will deploy the QuantyKube operator (deploy/quantykube.yaml, image $QK_QUANTYKUBE_IMAGE) and drive both moves through it end to end (operator issue)." ;;
	demo) echo "demo: not yet. It will run 'up' then 'e2e' with readable output (operator issue)." ;;
	esac >&2
	exit 2
}
