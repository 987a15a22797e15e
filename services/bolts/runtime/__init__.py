"""The Spark runtime around the bolts, apart from their data path: the session
(:mod:`.session`), the driver's class archive (:mod:`.cds`) and Java classes
(:mod:`.driver_classes`, ``java/``), the Python workers' heap (:mod:`.heap`) and site
hook (:mod:`.spark_python`, ``spark_site/``), and the processes kept warm for a job: a
spare before it (:mod:`.spare`) and a standby beside it (:mod:`.standby`)."""
