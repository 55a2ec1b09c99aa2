--
-- PostgreSQL database dump
--

\restrict HgXAZvMKsPRfAR9s2ZrTTyP8zPxM21UBo3sHvwoal1Nm8fwW6529G6hU8jnzCzp

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: abo_meta; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.abo_meta (
    key character varying(64) NOT NULL,
    value text NOT NULL
);


--
-- Name: abo_queue; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.abo_queue (
    id integer NOT NULL,
    study_id integer NOT NULL,
    params text NOT NULL,
    retry_of integer,
    attempt integer NOT NULL,
    info text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: abo_queue_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.abo_queue_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: abo_queue_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.abo_queue_id_seq OWNED BY public.abo_queue.id;


--
-- Name: abo_studies; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.abo_studies (
    id integer NOT NULL,
    name character varying(255) NOT NULL,
    space text NOT NULL,
    direction character varying(16) NOT NULL,
    strategy character varying(64) NOT NULL,
    seed bigint NOT NULL,
    config text NOT NULL,
    n_trials integer NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: abo_studies_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.abo_studies_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: abo_studies_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.abo_studies_id_seq OWNED BY public.abo_studies.id;


--
-- Name: abo_trials; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.abo_trials (
    id integer NOT NULL,
    study_id integer NOT NULL,
    number integer NOT NULL,
    state character varying(16) NOT NULL,
    params text NOT NULL,
    value double precision,
    reason text,
    retry_of integer,
    attempt integer NOT NULL,
    info text NOT NULL,
    user_attrs text NOT NULL,
    created_at double precision NOT NULL,
    finished_at double precision,
    lease_expires_at double precision
);


--
-- Name: abo_trials_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.abo_trials_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: abo_trials_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.abo_trials_id_seq OWNED BY public.abo_trials.id;


--
-- Name: abo_queue id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_queue ALTER COLUMN id SET DEFAULT nextval('public.abo_queue_id_seq'::regclass);


--
-- Name: abo_studies id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_studies ALTER COLUMN id SET DEFAULT nextval('public.abo_studies_id_seq'::regclass);


--
-- Name: abo_trials id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_trials ALTER COLUMN id SET DEFAULT nextval('public.abo_trials_id_seq'::regclass);


--
-- Data for Name: abo_meta; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.abo_meta VALUES ('schema_version', '1');


--
-- Data for Name: abo_queue; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: abo_studies; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.abo_studies VALUES (1, 'legacy', '{"x":{"type":"float","low":-2.0,"high":2.0,"log":false},"n":{"type":"int","low":1,"high":8,"log":true},"kind":{"type":"categorical","choices":["a","b","c"]}}', 'minimize', 'qlognei', 7, '{"n_initial":4,"lease_seconds":3600.0,"max_retries":1,"noise":"auto","strategy_options":{},"refit":"sync","max_staleness":null,"max_exact":500}', 11, 1796080079.3114042);
INSERT INTO public.abo_studies VALUES (2, 'maxi', '{"lr":{"type":"float","low":0.0001,"high":0.1,"log":true}}', 'maximize', 'thompson', 3, '{"n_initial":null,"lease_seconds":86400.0,"max_retries":1,"noise":"deterministic","strategy_options":{},"refit":"background","max_staleness":50,"max_exact":500}', 3, 1796080098.0048423);


--
-- Data for Name: abo_trials; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.abo_trials VALUES (1, 1, 1, 'done', '{"x":0.5,"n":2,"kind":"a"}', 1.25, NULL, NULL, 0, '{"strategy":"added"}', '{"note":"warm start"}', 1796080079.3140898, 1796080079.3140898, NULL);
INSERT INTO public.abo_trials VALUES (2, 1, 2, 'done', '{"x":-1.0,"n":4,"kind":"b"}', 2.2900000000000005, NULL, NULL, 0, '{"strategy":"enqueued"}', '{"i":0}', 1796080079.323708, 1796080079.3279731, NULL);
INSERT INTO public.abo_trials VALUES (3, 1, 3, 'done', '{"x":-1.2021074891090393,"n":1,"kind":"a"}', 2.3563269088374628, NULL, NULL, 0, '{"strategy":"sobol"}', '{"i":1}', 1796080079.337158, 1796080079.34601, NULL);
INSERT INTO public.abo_trials VALUES (4, 1, 4, 'done', '{"x":0.9297038428485394,"n":6,"kind":"b"}', 1.196526929698218, NULL, NULL, 0, '{"strategy":"sobol"}', '{"i":2}', 1796080079.3602514, 1796080079.3696184, NULL);
INSERT INTO public.abo_trials VALUES (5, 1, 5, 'failed', '{"x":1.05626431421895,"n":3,"kind":"a"}', NULL, 'diverged', NULL, 0, '{"strategy":"qlognei","proposal_seconds":2.162639,"fit_seconds":1.899322,"n_observations":4,"gp_points":4,"fit_observations":4,"model":{"hypers":{"likelihood.noise_covar.raw_noise":[0.006634737070344227],"mean_module.raw_constant":[0.013622046630449816],"covar_module.raw_outputscale":[0.6600240292676207],"covar_module.base_kernel.raw_lengthscale":[0.19212748495988546,1.0313395314432938,1.785459705933247,1.785459705933247,0.45791696771981094]},"key":"4697a8195a0e8ef4","n":4}}', '{"epoch":2}', 1796080081.5377612, 1796080081.5461605, NULL);
INSERT INTO public.abo_trials VALUES (6, 1, 6, 'done', '{"x":0.7278344963899213,"n":5,"kind":"b"}', 0.8830423563012175, NULL, NULL, 0, '{"strategy":"qlognei","proposal_seconds":2.991165,"fit_seconds":2.552539,"n_observations":5,"gp_points":5,"fit_observations":5,"model":{"hypers":{"likelihood.noise_covar.raw_noise":[0.00674557429316048],"mean_module.raw_constant":[-0.011292808270394066],"covar_module.raw_outputscale":[0.9086206144789597],"covar_module.base_kernel.raw_lengthscale":[0.08153186739213239,0.4400898161569982,0.4546131918500795,0.4546131918500795,0.4579169937656214]},"key":"c0b104983120c180","n":5}}', '{"i":4}', 1796080084.5429618, 1796080084.5483973, NULL);
INSERT INTO public.abo_trials VALUES (7, 1, 7, 'done', '{"x":0.5216711972475192,"n":4,"kind":"b"}', 0.6491381196891486, NULL, NULL, 0, '{"strategy":"qlognei","proposal_seconds":3.307228,"fit_seconds":2.811017,"n_observations":6,"gp_points":6,"fit_observations":6,"model":{"hypers":{"likelihood.noise_covar.raw_noise":[0.006680764935797292],"mean_module.raw_constant":[-0.2003034618903037],"covar_module.raw_outputscale":[0.8648185343078667],"covar_module.base_kernel.raw_lengthscale":[0.10527102922010043,0.5644283518100186,0.7181639638530283,0.7181639638530283,0.45791698204113634]},"key":"9e3572a0f032c6dd","n":6}}', '{"i":5}', 1796080087.8643003, 1796080087.8708563, NULL);
INSERT INTO public.abo_trials VALUES (8, 1, 8, 'done', '{"x":0.3595247390323717,"n":3,"kind":"b"}', 0.503543194556872, NULL, NULL, 0, '{"strategy":"qlognei","proposal_seconds":3.719274,"fit_seconds":3.176399,"n_observations":7,"gp_points":7,"fit_observations":7,"model":{"hypers":{"likelihood.noise_covar.raw_noise":[0.005909793386944809],"mean_module.raw_constant":[-0.38552392886603815],"covar_module.raw_outputscale":[0.892171406145055],"covar_module.base_kernel.raw_lengthscale":[0.1578112142466703,0.9215474663238283,1.2659745281209012,1.2659745281209005,0.4579169817255691]},"key":"e067c7bc7573d0b3","n":7}}', '{"i":6}', 1796080091.596644, 1796080091.6067286, NULL);
INSERT INTO public.abo_trials VALUES (9, 1, 9, 'done', '{"x":0.3421631481260432,"n":1,"kind":"b"}', 0.3017777310598987, NULL, NULL, 0, '{"strategy":"qlognei","proposal_seconds":3.085648,"fit_seconds":2.605164,"n_observations":8,"gp_points":8,"fit_observations":8,"model":{"hypers":{"likelihood.noise_covar.raw_noise":[0.004846482597240441],"mean_module.raw_constant":[-0.5591425308593699],"covar_module.raw_outputscale":[0.9450318838857451],"covar_module.base_kernel.raw_lengthscale":[0.191797189618919,1.1984973665594465,1.503530981727047,1.5035168081160544,0.4579117311858588]},"key":"d1f06093bc699079","n":8}}', '{"i":7}', 1796080094.6984642, 1796080094.7035413, NULL);
INSERT INTO public.abo_trials VALUES (10, 1, 10, 'lost', '{"x":0.3117491296997139,"n":1,"kind":"b"}', NULL, 'worker died', NULL, 0, '{"strategy":"qlognei","proposal_seconds":3.252825,"fit_seconds":2.875056,"n_observations":9,"gp_points":9,"fit_observations":9,"model":{"hypers":{"likelihood.noise_covar.raw_noise":[0.0043141000976220185],"mean_module.raw_constant":[-0.6656514589623188],"covar_module.raw_outputscale":[0.9540888680603221],"covar_module.base_kernel.raw_lengthscale":[0.20378800846074163,1.7027235688501923,1.5544362909616867,1.554437768192371,0.45791506916753855]},"key":"5cc49920a2380efa","n":9}}', '{}', 1796080097.9642408, 1796080097.9684808, 1796083697.9642408);
INSERT INTO public.abo_trials VALUES (11, 1, 11, 'running', '{"x":0.3117491296997139,"n":1,"kind":"b"}', NULL, NULL, 10, 1, '{}', '{}', 1796080097.9773085, NULL, 1796083697.9819987);
INSERT INTO public.abo_trials VALUES (12, 2, 1, 'done', '{"lr":0.00016047056644117347}', -0.009839529433558827, NULL, NULL, 0, '{"strategy":"sobol"}', '{}', 1796080098.024186, 1796080098.0301292, NULL);
INSERT INTO public.abo_trials VALUES (13, 2, 2, 'done', '{"lr":0.005848266672526193}', -0.004151733327473807, NULL, NULL, 0, '{"strategy":"sobol"}', '{}', 1796080098.048328, 1796080098.0535285, NULL);
INSERT INTO public.abo_trials VALUES (14, 2, 3, 'done', '{"lr":0.003783867901249182}', -0.006216132098750818, NULL, NULL, 0, '{"strategy":"thompson","proposal_seconds":0.432111,"fit_seconds":0.193221,"n_observations":2,"gp_points":2,"fit_observations":2,"model":{"hypers":{"mean_module.raw_constant":[-1.2285039778906344e-14],"covar_module.raw_outputscale":[0.7141547422518995],"covar_module.base_kernel.raw_lengthscale":[0.162604512557974]},"key":"2219fecb861ae82b","n":2}}', '{}', 1796080098.5037446, 1796080098.5101311, NULL);


--
-- Name: abo_queue_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.abo_queue_id_seq', 2, true);


--
-- Name: abo_studies_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.abo_studies_id_seq', 2, true);


--
-- Name: abo_trials_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.abo_trials_id_seq', 14, true);


--
-- Name: abo_meta abo_meta_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_meta
    ADD CONSTRAINT abo_meta_pkey PRIMARY KEY (key);


--
-- Name: abo_queue abo_queue_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_queue
    ADD CONSTRAINT abo_queue_pkey PRIMARY KEY (id);


--
-- Name: abo_studies abo_studies_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_studies
    ADD CONSTRAINT abo_studies_name_key UNIQUE (name);


--
-- Name: abo_studies abo_studies_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_studies
    ADD CONSTRAINT abo_studies_pkey PRIMARY KEY (id);


--
-- Name: abo_trials abo_trials_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_trials
    ADD CONSTRAINT abo_trials_pkey PRIMARY KEY (id);


--
-- Name: abo_trials uq_trial_number; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_trials
    ADD CONSTRAINT uq_trial_number UNIQUE (study_id, number);


--
-- Name: ix_trials_study_state; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_trials_study_state ON public.abo_trials USING btree (study_id, state);


--
-- Name: abo_queue abo_queue_study_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_queue
    ADD CONSTRAINT abo_queue_study_id_fkey FOREIGN KEY (study_id) REFERENCES public.abo_studies(id) ON DELETE CASCADE;


--
-- Name: abo_trials abo_trials_study_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.abo_trials
    ADD CONSTRAINT abo_trials_study_id_fkey FOREIGN KEY (study_id) REFERENCES public.abo_studies(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict HgXAZvMKsPRfAR9s2ZrTTyP8zPxM21UBo3sHvwoal1Nm8fwW6529G6hU8jnzCzp

