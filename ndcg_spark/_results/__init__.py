"""What ``evaluate`` returns: the lazy frames of an evaluation
(:mod:`~ndcg_spark._results.evaluation_result`) and, for a client that writes each once, the frames
and what their writes observe (:mod:`~ndcg_spark._results.written_once`)."""
