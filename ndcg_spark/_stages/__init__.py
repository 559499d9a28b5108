"""NDCG's stages, in the order of the data's way: each module owns one stage, writes the columns
of the contract (:mod:`~ndcg_spark._stages.column_contract`) it is declared the writer of, and reads only
the contract's columns, never another stage's module.

* :mod:`~ndcg_spark._stages.inputs`: the tables as rows, checked and narrowed to what the metrics read;
* :mod:`~ndcg_spark._stages.rules`: the row rules (a bad row stops the run, or is set aside);
* :mod:`~ndcg_spark._stages.ranking`: each user's top k, as a list;
* :mod:`~ndcg_spark._stages.judged`: each user's judgements and ideal list;
* :mod:`~ndcg_spark._stages.lists`: the two lists joined, so no user is lost;
* :mod:`~ndcg_spark._stages.scoring`: gains and the sums at every cutoff, one row per (user, k);
* :mod:`~ndcg_spark._stages.summary`: the exclusion policies, the means, the row accounting.
"""
