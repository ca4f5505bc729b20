"""An in-memory service (one connection) answers a result with its explanation."""

from simeval.service import Service


def test_in_memory_get_result_explains():
    service = Service(":memory:")
    service.create_eval("capital", ["Paris is the capital of France."], threshold=0.5)
    service.test_eval("capital", "Capital?", "Paris is the capital of France.")
    service.activate_eval("capital")
    capture = service.capture("Capital?", "Lyon is a city in France.")
    result = service.get_result(capture.results[0].id)
    assert result.explanation is not None
    assert "paris" in {m["term"] for m in result.explanation["missing"]}
