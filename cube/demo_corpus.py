"""A deterministic generator of SYNTHETIC government service guides (the demo knowledge base).

Nothing here is real data. The guides belong to a fictional province (明川省, "Mingchuan
Province"), are published on a fictional domain (`https://zwfw.demo-province.example/...`),
list consultation numbers with the fictional area code 0000, and every row carries
`synthetic = True`. The generator exists so the workbench runs end to end offline with a
knowledge base shaped like the paper's (section 3.2: one record of 18 fields per service item;
6,111 province-level items), including what makes that corpus hard for retrieval:

- families of near-duplicate items (the paper's "Approval for Pumped Storage Power Station
  Projects" / "... (New Construction)" / "... (Modification)"): a base item and variants that
  share most of their text and differ in time limits, materials, fee and one requirement;
- the same item offered by several cities or counties (same name, different region, agency,
  address and phone number).

All random choices are drawn before the language is applied, so the zh and en corpora for
one seed are translations of each other, and the output is identical byte for byte for a
given (n_items, lang, family_share, seed).
"""

from __future__ import annotations

import random
from typing import Any

import pandas as pd

DEMO_DOMAIN = "https://zwfw.demo-province.example"
_L = {"zh": 0, "en": 1}


def _p(*pairs: str) -> list[tuple[str, str]]:
    """'中文|English' strings -> [(zh, en)] (keeps the bilingual vocabulary compact)."""
    return [tuple(s.split("|", 1)) for s in pairs]  # type: ignore[misc]


PROVINCE = ("明川省", "Mingchuan Province")
# City -> its districts/counties. All names are invented for the fictional province.
CITIES = {
    "青石市|Qingshi City": _p("临江区|Linjiang District", "云岗区|Yungang District", "松林县|Songlin County",
        "东坪县|Dongping County", "茶园县|Chayuan County"),
    "白沙市|Baisha City": _p("望湖区|Wanghu District", "清河县|Qinghe County", "石桥县|Shiqiao County",
        "沙洲区|Shazhou District", "横岭县|Hengling County"),
    "东陵市|Dongling City": _p("石门区|Shimen District", "柳溪县|Liuxi County", "梅岭县|Meiling County",
        "陵西区|Lingxi District", "杉木县|Shanmu County"),
    "南浦市|Nanpu City": _p("滨江区|Binjiang District", "红岩县|Hongyan County", "金沙县|Jinsha County",
        "浦西区|Puxi District", "砚池县|Yanchi County"),
    "北岭市|Beiling City": _p("岭北区|Lingbei District", "鹤鸣县|Heming County", "桂溪县|Guixi County",
        "岭南区|Lingnan District", "石城县|Shicheng County"),
    "雾山市|Wushan City": _p("龙潭区|Longtan District", "新桥县|Xinqiao County", "雁湖县|Yanhu County",
        "雾峰区|Wufeng District", "兰亭县|Lanting County"),
    "安和市|Anhe City": _p("安平区|Anping District", "竹园县|Zhuyuan County", "枫林县|Fenglin County",
        "和丰区|Hefeng District", "云台县|Yuntai County"),
    "瑶台市|Yaotai City": _p("瑶北区|Yaobei District", "青松县|Qingsong County", "白鹭县|Bailu County",
        "瑶南区|Yaonan District", "苍梧县|Cangwu County"),
    "丹江市|Danjiang City": _p("丹北区|Danbei District", "黎平区|Liping District", "长坡县|Changpo County",
        "江口区|Jiangkou District", "桐木县|Tongmu County"),
}
STREETS = _p("人民路|Renmin Road", "解放路|Jiefang Road", "新华路|Xinhua Road", "世纪大道|Century Avenue",
             "滨江路|Binjiang Road", "文化路|Wenhua Road", "建设路|Jianshe Road", "环城北路|North Ring Road")

# Sector: (province-level agency, city/county-level agency, service templates, laws, materials).
# A service template: ("中文模板|English template", kind, for_persons, fillers); "{x}" takes a filler.
SECTORS: list[dict[str, Any]] = [
    dict(agency=_p("发展和改革委员会|Development and Reform Commission", "发展和改革局|Development and Reform Bureau"),
         services=[("{x}项目核准|Approval for {x} Projects", "approval", False, _p(
             "抽水蓄能电站|Pumped Storage Power Station", "风电场|Wind Farm", "集中式光伏电站|Centralized Photovoltaic Power Station",
             "水电站|Hydropower Station", "220千伏输变电工程|220 kV Power Transmission and Transformation",
             "城市燃气管网|Urban Gas Pipeline Network", "通用机场|General Aviation Airport", "高速公路|Expressway")),
             ("{x}项目节能审查|Energy Conservation Review of {x} Projects", "approval", False, _p(
                 "固定资产投资|Fixed-Asset Investment", "数据中心|Data Centre", "钢铁|Steel", "水泥|Cement", "化工|Chemical")),
             ("企业投资{x}项目备案|Filing of Enterprise-Invested {x} Projects", "registration", False, _p(
                 "技术改造|Technical Renovation", "仓储物流|Warehousing and Logistics",
                 "农产品加工|Agricultural Product Processing", "分布式光伏|Distributed Photovoltaic"))],
         laws=_p("企业投资项目核准和备案管理条例|Regulations on the Administration of Approval and Filing of Enterprise Investment Projects",
                 "固定资产投资项目节能审查办法|Measures for the Energy Conservation Review of Fixed-Asset Investment Projects"),
         materials=_p("项目申请报告|Project application report", "选址意见书或用地预审意见|Site selection opinion or land-use pre-examination opinion",
                      "节能报告|Energy conservation report", "项目资金来源证明|Proof of project funding sources")),
    dict(agency=_p("自然资源厅|Department of Natural Resources", "自然资源局|Natural Resources Bureau"),
         services=[("{x}采矿许可证核发|Issuance of Mining Licences for {x}", "licence", False, _p(
             "煤炭|Coal", "磷矿|Phosphate", "铝土矿|Bauxite", "锰矿|Manganese", "建筑用砂石|Construction Sand and Gravel",
             "地热|Geothermal Resources")),
             ("{x}建设用地预审与选址意见书核发|Land-Use Pre-examination and Site Selection Opinion for {x}", "approval", False, _p(
                 "单独选址项目|Separately Sited Projects", "线性工程|Linear Engineering Projects", "城镇批次用地|Urban Batch Land")),
             ("{x}首次登记|First Registration of {x}", "registration", False, _p(
                 "国有建设用地使用权|State-Owned Construction Land Use Rights", "房屋所有权|Housing Ownership",
                 "林权|Forest Rights", "集体土地所有权|Collective Land Ownership"))],
         laws=_p("中华人民共和国矿产资源法|Mineral Resources Law of the PRC", "中华人民共和国土地管理法|Land Administration Law of the PRC",
                 "不动产登记暂行条例|Interim Regulations on Real Estate Registration"),
         materials=_p("矿产资源开发利用方案|Mineral resource development and utilisation plan", "权属来源证明材料|Proof of the source of title",
                      "不动产界址、空间界限与面积材料|Boundary, spatial extent and area survey of the property",
                      "地质灾害危险性评估报告|Geological hazard risk assessment report")),
    dict(agency=_p("住房和城乡建设厅|Department of Housing and Urban-Rural Development",
                   "住房和城乡建设局|Housing and Urban-Rural Development Bureau"),
         services=[("{x}资质核准|Approval of {x} Qualifications", "licence", False, _p(
             "建筑工程施工总承包|General Contracting for Building Construction", "市政公用工程施工总承包|General Contracting for Municipal Works",
             "工程监理|Project Supervision", "房地产开发企业|Real Estate Developer", "工程造价咨询|Construction Cost Consulting")),
             ("{x}施工许可证核发|Issuance of Construction Permits for {x}", "licence", False, _p(
                 "房屋建筑工程|Building Works", "市政基础设施工程|Municipal Infrastructure Works", "装配式建筑|Prefabricated Buildings")),
             ("{x}执业注册|Practice Registration of {x}", "registration", True, _p(
                 "二级建造师|Second-Class Constructors", "二级注册结构工程师|Second-Class Registered Structural Engineers",
                 "二级注册建筑师|Second-Class Registered Architects"))],
         laws=_p("中华人民共和国建筑法|Construction Law of the PRC",
                 "建设工程质量管理条例|Regulations on the Quality Management of Construction Projects",
                 "建筑业企业资质管理规定|Provisions on the Administration of Qualifications of Construction Enterprises"),
         materials=_p("施工图设计文件审查合格书|Certificate of approval of construction drawings",
                      "中标通知书及施工合同|Bid-winning notice and construction contract",
                      "专业技术人员职称证书及社保缴纳证明|Professional titles and social insurance records of technical staff",
                      "质量安全保证措施|Quality and safety assurance measures")),
    dict(agency=_p("市场监督管理局|Administration for Market Regulation", "市场监督管理局|Market Regulation Bureau"),
         services=[("{x}经营许可|{x} Business Licence", "licence", False, _p(
             "食品|Food", "药品零售|Drug Retail", "第三类医疗器械|Class III Medical Device")),
             ("{x}生产许可证核发|Issuance of Production Licences for {x}", "licence", False, _p(
                 "食品|Food", "食品添加剂|Food Additives", "化肥|Chemical Fertiliser", "电线电缆|Wires and Cables",
                 "危险化学品包装物|Hazardous Chemical Packaging")),
             ("{x}设立登记|Establishment Registration of {x}", "registration", False, _p(
                 "有限责任公司|Limited Liability Companies", "个人独资企业|Sole Proprietorships", "合伙企业|Partnerships",
                 "农民专业合作社|Farmers' Specialised Cooperatives")),
             ("{x}使用登记|Use Registration of {x}", "registration", False, _p(
                 "锅炉|Boilers", "压力容器|Pressure Vessels", "电梯|Elevators", "起重机械|Lifting Machinery"))],
         laws=_p("中华人民共和国食品安全法|Food Safety Law of the PRC",
                 "中华人民共和国市场主体登记管理条例|Regulations of the PRC on the Administration of Registration of Market Entities",
                 "中华人民共和国特种设备安全法|Special Equipment Safety Law of the PRC",
                 "中华人民共和国工业产品生产许可证管理条例|Regulations of the PRC on Production Licences for Industrial Products"),
         materials=_p("经营场所使用证明|Proof of the right to use the business premises",
                      "主要设备设施布局及工艺流程图|Layout of main equipment and process flow chart",
                      "公司章程|Articles of association", "产品检验报告|Product inspection report")),
    dict(agency=_p("生态环境厅|Department of Ecology and Environment", "生态环境局|Ecology and Environment Bureau"),
         services=[("{x}环境影响报告书审批|Approval of Environmental Impact Reports for {x}", "approval", False, _p(
             "水利水电项目|Water Conservancy and Hydropower Projects", "化工园区|Chemical Industrial Parks",
             "垃圾焚烧发电项目|Waste-to-Energy Projects", "矿山开采项目|Mining Projects", "公路建设项目|Highway Construction Projects")),
             ("{x}排污许可证核发|Issuance of Pollutant Discharge Permits for {x}", "licence", False, _p(
                 "火电企业|Thermal Power Enterprises", "造纸企业|Paper-Making Enterprises", "制药企业|Pharmaceutical Enterprises",
                 "污水处理厂|Sewage Treatment Plants")),
             ("{x}经营许可证核发|Issuance of Business Licences for {x}", "licence", False, _p(
                 "危险废物收集|Hazardous Waste Collection", "危险废物综合利用|Hazardous Waste Recycling"))],
         laws=_p("中华人民共和国环境影响评价法|Environmental Impact Assessment Law of the PRC",
                 "排污许可管理条例|Regulations on the Administration of Pollutant Discharge Permits",
                 "中华人民共和国固体废物污染环境防治法|Law of the PRC on the Prevention of Environmental Pollution by Solid Waste"),
         materials=_p("环境影响报告书（全本及公示删除说明）|Environmental impact report (full text and redaction note)",
                      "污染防治设施运行情况说明|Description of pollution control facilities",
                      "自行监测方案|Self-monitoring plan", "公众参与说明|Public participation statement")),
    dict(agency=_p("交通运输厅|Department of Transport", "交通运输局|Transport Bureau"),
         services=[("{x}经营许可|{x} Operation Licence", "licence", False, _p(
             "道路旅客运输|Road Passenger Transport", "道路货物运输|Road Freight Transport",
             "危险货物道路运输|Road Transport of Dangerous Goods", "机动车驾驶员培训|Motor Vehicle Driver Training",
             "网络预约出租汽车|Online Ride-Hailing")),
             ("公路{x}许可|Highway {x} Permit", "approval", False, _p(
                 "超限运输车辆行驶|Oversize Vehicle Travel", "占用挖掘|Occupation and Excavation", "跨越穿越|Crossing",
                 "增设平面交叉道口|Additional At-Grade Intersection"))],
         laws=_p("中华人民共和国道路运输条例|Regulations of the PRC on Road Transport", "中华人民共和国公路法|Highway Law of the PRC",
                 "公路安全保护条例|Regulations on Highway Safety Protection"),
         materials=_p("车辆行驶证及技术等级评定证明|Vehicle licences and technical grade certificates",
                      "驾驶人员从业资格证|Drivers' professional qualification certificates",
                      "安全生产管理制度文本|Work safety management rules", "通行路线图及护送方案|Route map and escort plan")),
    dict(agency=_p("卫生健康委员会|Health Commission", "卫生健康局|Health Bureau"),
         services=[("{x}执业登记|Practice Registration of {x}", "registration", False, _p(
             "医疗机构|Medical Institutions", "医师|Physicians", "护士|Nurses")),
             ("{x}许可|{x} Licence", "licence", False, _p(
                 "放射诊疗|Radiological Diagnosis and Treatment", "母婴保健技术服务|Maternal and Infant Health Care Services",
                 "公共场所卫生|Public Place Hygiene", "消毒产品生产企业卫生|Disinfectant Producer Hygiene"))],
         laws=_p("医疗机构管理条例|Regulations on the Administration of Medical Institutions", "中华人民共和国医师法|Physicians Law of the PRC",
                 "护士条例|Regulations on Nurses", "放射诊疗管理规定|Provisions on Radiological Diagnosis and Treatment"),
         materials=_p("执业人员资格证书|Qualification certificates of practitioners", "房屋平面布局图|Floor plan of the premises",
                      "卫生检测报告|Hygiene test report", "体检合格证明|Certificate of a passed health examination")),
    dict(agency=_p("教育厅|Department of Education", "教育局|Education Bureau"),
         services=[("{x}设立审批|Approval of the Establishment of {x}", "approval", False, _p(
             "民办高级中学|Private Senior High Schools", "民办中等职业学校|Private Secondary Vocational Schools",
             "中外合作办学机构|Sino-Foreign Cooperative Schools", "民办幼儿园|Private Kindergartens")),
             ("{x}教师资格认定|{x} Teacher Qualification Certification", "registration", True, _p(
                 "高级中学|Senior High School", "初级中学|Junior High School", "小学|Primary School", "幼儿园|Kindergarten",
                 "中等职业学校|Secondary Vocational School"))],
         laws=_p("中华人民共和国民办教育促进法|Law of the PRC on the Promotion of Privately-Run Schools",
                 "教师资格条例|Regulations on Teacher Qualifications", "中华人民共和国教师法|Teachers Law of the PRC"),
         materials=_p("办学章程及发展规划|School charter and development plan", "校舍安全鉴定报告|School building safety appraisal",
                      "普通话水平测试等级证书|Putonghua proficiency certificate", "学历证书|Academic diploma")),
    dict(agency=_p("人力资源和社会保障厅|Department of Human Resources and Social Security",
                   "人力资源和社会保障局|Human Resources and Social Security Bureau"),
         services=[("{x}许可|{x} Licence", "licence", False, _p(
             "人力资源服务|Human Resources Services", "劳务派遣经营|Labour Dispatch Business")),
             ("{x}审批|Approval of {x}", "approval", False, _p(
                 "企业实行不定时工作制|Flexible Working Hours in Enterprises",
                 "企业实行综合计算工时工作制|Comprehensive Working Hours in Enterprises")),
             ("{x}申领|Application for {x}", "registration", True, _p(
                 "失业保险金|Unemployment Insurance Benefits", "工伤保险待遇|Work Injury Insurance Benefits",
                 "社会保障卡|Social Security Cards", "职业培训补贴|Vocational Training Subsidies"))],
         laws=_p("中华人民共和国就业促进法|Employment Promotion Law of the PRC", "中华人民共和国劳动合同法|Labour Contract Law of the PRC",
                 "中华人民共和国社会保险法|Social Insurance Law of the PRC", "工伤保险条例|Regulations on Work-Related Injury Insurance"),
         materials=_p("劳动合同文本|Labour contract template", "职工名册及社保缴费记录|Staff roster and social insurance payment records",
                      "银行账户信息|Bank account details", "工会或职工代表大会意见|Opinion of the trade union or workers' congress")),
    dict(agency=_p("水利厅|Department of Water Resources", "水务局|Water Affairs Bureau"),
         services=[("{x}取水许可|Water Abstraction Permit for {x}", "licence", False, _p(
             "工业用水|Industrial Use", "农业灌溉|Agricultural Irrigation", "城镇供水|Urban Water Supply", "水力发电|Hydropower Generation")),
             ("{x}审批|Approval of {x}", "approval", False, _p(
                 "生产建设项目水土保持方案|Soil and Water Conservation Plans for Construction Projects",
                 "河道管理范围内建设项目工程建设方案|Construction Plans for Projects in River Management Zones",
                 "水工程建设规划同意书|Planning Consent for Water Projects"))],
         laws=_p("中华人民共和国水法|Water Law of the PRC",
                 "取水许可和水资源费征收管理条例|Regulations on Water Abstraction Permits and Water Resource Fees",
                 "中华人民共和国水土保持法|Soil and Water Conservation Law of the PRC"),
         materials=_p("水资源论证报告|Water resources assessment report", "取水和退水计量方案|Metering plan for abstraction and discharge",
                      "水土保持方案报告书|Soil and water conservation plan", "防洪影响评价报告|Flood impact assessment report")),
    dict(agency=_p("文化和旅游厅|Department of Culture and Tourism", "文化和旅游局|Culture and Tourism Bureau"),
         services=[("{x}审批|Approval of {x}", "approval", False, _p(
             "营业性演出|Commercial Performances", "娱乐场所经营|Entertainment Venue Operation", "旅行社设立|Travel Agency Establishment",
             "互联网上网服务营业场所|Internet Service Venues")),
             ("{x}级文物保护单位修缮方案审批|Approval of Restoration Plans for {x}-Level Protected Cultural Relics Sites",
              "approval", False, _p("省|Provincial", "市|Municipal", "县|County"))],
         laws=_p("营业性演出管理条例|Regulations on the Administration of Commercial Performances", "旅行社条例|Regulations on Travel Agencies",
                 "娱乐场所管理条例|Regulations on the Administration of Entertainment Venues",
                 "中华人民共和国文物保护法|Cultural Relics Protection Law of the PRC"),
         materials=_p("演出节目内容说明|Description of the programme", "消防安全检查合格证明|Fire safety inspection certificate",
                      "质量保证金存款证明|Proof of the quality deposit", "修缮设计方案|Restoration design plan")),
    dict(agency=_p("民政厅|Department of Civil Affairs", "民政局|Civil Affairs Bureau"),
         services=[("{x}成立登记|Establishment Registration of {x}", "registration", False, _p(
             "社会团体|Social Organisations", "民办非企业单位|Private Non-Enterprise Units", "基金会|Foundations")),
             ("{x}|{x}", "registration", False, _p(
                 "养老机构备案|Filing of Elderly Care Institutions", "慈善组织认定|Recognition of Charitable Organisations",
                 "公开募捐资格审核|Review of Public Fundraising Qualifications"))],
         laws=_p("社会团体登记管理条例|Regulations on the Registration of Social Organisations",
                 "基金会管理条例|Regulations on the Administration of Foundations", "中华人民共和国慈善法|Charity Law of the PRC",
                 "中华人民共和国老年人权益保障法|Law of the PRC on the Protection of the Rights of the Elderly"),
         materials=_p("章程草案|Draft articles of association", "验资报告|Capital verification report",
                      "业务主管单位批准文件|Approval of the supervising unit", "拟任负责人基本情况|Profiles of the proposed officers")),
    dict(agency=_p("农业农村厅|Department of Agriculture and Rural Affairs", "农业农村局|Agriculture and Rural Affairs Bureau"),
         services=[("{x}种子生产经营许可证核发|Issuance of Seed Production and Operation Licences for {x}", "licence", False, _p(
             "水稻|Rice", "玉米|Maize", "马铃薯|Potato", "茶树|Tea Plant", "油菜|Rapeseed")),
             ("{x}经营许可|{x} Business Licence", "licence", False, _p("农药|Pesticide", "兽药|Veterinary Drug", "饲料|Feed")),
             ("{x}动物防疫条件合格证核发|Issuance of Animal Epidemic Prevention Certificates for {x}", "licence", False, _p(
                 "生猪养殖场|Pig Farms", "屠宰加工场所|Slaughterhouses", "动物隔离场所|Animal Isolation Sites"))],
         laws=_p("中华人民共和国种子法|Seed Law of the PRC", "农药管理条例|Regulations on Pesticide Administration",
                 "兽药管理条例|Regulations on the Administration of Veterinary Drugs",
                 "中华人民共和国动物防疫法|Animal Epidemic Prevention Law of the PRC"),
         materials=_p("检验室及仪器设备清单|List of laboratory instruments and equipment", "种子生产地点检疫证明|Quarantine certificate of the seed production site",
                      "选址及平面布局图|Site and floor plan", "无害化处理设施说明|Description of harmless treatment facilities")),
    dict(agency=_p("林业局|Forestry Administration", "林业局|Forestry Bureau"),
         services=[("{x}林木采伐许可证核发|Issuance of Timber Felling Licences for {x}", "licence", False, _p(
             "商品林|Commercial Forests", "人工林|Plantation Forests", "竹林|Bamboo Forests")),
             ("{x}使用林地审核|Review of Forest Land Use for {x}", "approval", False, _p(
                 "建设项目|Construction Projects", "勘查开采矿藏|Mineral Exploration and Mining", "临时工程|Temporary Works"))],
         laws=_p("中华人民共和国森林法|Forest Law of the PRC",
                 "中华人民共和国森林法实施条例|Regulations for the Implementation of the Forest Law of the PRC"),
         materials=_p("伐区调查设计文件|Felling area survey and design", "林地权属证明|Proof of forest land title",
                      "使用林地现状调查表|Survey form of the forest land in use", "森林植被恢复费缴纳凭证|Receipt of the forest vegetation restoration fee")),
    dict(agency=_p("应急管理厅|Department of Emergency Management", "应急管理局|Emergency Management Bureau"),
         services=[("{x}安全生产许可证核发|Issuance of Work Safety Licences for {x}", "licence", False, _p(
             "非煤矿矿山企业|Non-Coal Mining Enterprises", "危险化学品生产企业|Hazardous Chemical Producers",
             "烟花爆竹生产企业|Fireworks Manufacturers")),
             ("{x}经营许可证核发|Issuance of Business Licences for {x}", "licence", False, _p(
                 "危险化学品|Hazardous Chemicals", "烟花爆竹批发|Fireworks Wholesale")),
             ("{x}安全设施设计审查|Safety Facility Design Review for {x}", "approval", False, _p(
                 "金属冶炼建设项目|Metal Smelting Projects", "危险化学品建设项目|Hazardous Chemical Projects"))],
         laws=_p("中华人民共和国安全生产法|Work Safety Law of the PRC", "安全生产许可证条例|Regulations on Work Safety Licences",
                 "危险化学品安全管理条例|Regulations on the Safe Management of Hazardous Chemicals"),
         materials=_p("安全评价报告|Safety assessment report", "主要负责人安全生产知识考核合格证明|Safety training certificates of principal officers",
                      "应急救援预案|Emergency response plan", "安全设施设计专篇|Safety facility design chapter")),
    dict(agency=_p("商务厅|Department of Commerce", "商务局|Commerce Bureau"),
         services=[("{x}经营者备案登记|Filing Registration of {x} Operators", "registration", False, _p(
             "对外贸易|Foreign Trade", "单用途商业预付卡发卡企业|Single-Purpose Prepaid Card Issuers")),
             ("{x}经营资格核准|Approval of {x} Business Qualifications", "licence", False, _p(
                 "对外劳务合作|Overseas Labour Cooperation", "拍卖企业|Auction", "成品油零售|Refined Oil Retail"))],
         laws=_p("中华人民共和国对外贸易法|Foreign Trade Law of the PRC",
                 "对外劳务合作管理条例|Regulations on the Administration of Overseas Labour Cooperation",
                 "中华人民共和国拍卖法|Auction Law of the PRC"),
         materials=_p("风险处置备用金缴存证明|Proof of the risk reserve deposit", "经营场所产权证明|Title deed of the business premises",
                      "拍卖师资格证书|Auctioneer qualification certificates", "储油设施安全验收证明|Safety acceptance of oil storage facilities")),
]

# Generic pools shared by all sectors, keyed by the kind of service.
REQUIREMENTS = {
    "approval": _p("项目符合国家产业政策和行业准入标准|The project complies with national industrial policy and entry standards",
                   "项目符合国土空间规划及相关专项规划|The project complies with territorial spatial planning and sector plans",
                   "项目单位具有相应的资金筹措能力|The project entity can raise the required funds",
                   "已依法履行环境影响评价等前置手续|Prerequisites such as the environmental impact assessment are completed",
                   "申请材料真实、完整，符合法定形式|The application materials are true, complete and in the statutory form"),
    "licence": _p("申请人为依法设立的企业或其他组织|The applicant is a lawfully established enterprise or organisation",
                  "具有与经营规模相适应的场所、设施和设备|The applicant has premises, facilities and equipment suited to its scale",
                  "配备符合要求的专业技术人员和管理人员|The applicant employs qualified technical and management staff",
                  "具有健全的质量安全管理制度|The applicant has sound quality and safety management rules",
                  "近三年内无重大违法违规记录|The applicant has no serious violation on record in the past three years"),
    "registration": _p("申请人具有完全民事行为能力或为依法设立的组织|The applicant has full civil capacity or is a lawful organisation",
                       "申请登记事项符合法律法规规定|The matters to be registered comply with laws and regulations",
                       "提交的申请材料齐全、符合法定形式|The application materials are complete and in the statutory form",
                       "不存在权属争议或限制登记的情形|There is no ownership dispute or restriction on registration"),
}
ORG_MATERIALS = _p("申请书|Application form", "营业执照或统一社会信用代码证书|Business licence or unified social credit code certificate",
                   "法定代表人身份证明|Identity document of the legal representative",
                   "授权委托书及经办人身份证（委托办理时提供）|Power of attorney and the agent's ID card (when an agent applies)",
                   "信用承诺书|Credit commitment letter")
PERSON_MATERIALS = _p("申请表|Application form", "居民身份证|Resident identity card", "近期一寸免冠照片|Recent one-inch photograph",
                      "户口簿或居住证|Household register or residence permit")
FORMS = _p("（原件1份）| (1 original)", "（复印件1份）| (1 copy)", "（原件及复印件各1份）| (1 original and 1 copy)", "（电子版）| (electronic)")
# Variants of a family: name, an extra material, an extra requirement, statutory-time factor, free of charge.
VARIANTS: dict[str, list[tuple[tuple[str, str], tuple[str, str], tuple[str, str], float, bool]]] = {
    "approval": [
        (("新建", "New Construction"), ("项目可行性研究报告", "Project feasibility study report"),
         ("项目为新建项目，此前未取得同类核准文件", "The project is new and holds no earlier approval of this kind"), 1.0, False),
        (("变更", "Modification"), ("变更事项说明及相关证明材料", "Statement of the changes with supporting documents"),
         ("在原核准文件有效期内申请变更", "The change is requested while the original approval is valid"), 0.5, True),
        (("改扩建", "Renovation and Expansion"), ("原核准文件及现有设施情况说明", "Original approval and a description of existing facilities"),
         ("原项目已依法取得核准且正常运行", "The original project was lawfully approved and operates normally"), 1.0, False)],
    "licence": [
        (("首次申请", "First Application"), ("场所及设施设备照片", "Photographs of premises, facilities and equipment"),
         ("申请人此前未取得该许可", "The applicant has not held this licence before"), 1.0, False),
        (("变更", "Modification"), ("原许可证正副本", "Original and duplicate of the current licence"),
         ("许可事项发生变化之日起30日内提出申请", "The application is made within 30 days of the change"), 0.5, True),
        (("延续", "Renewal"), ("许可有效期内经营情况报告", "Report on operations during the licence period"),
         ("在许可有效期届满30个工作日前提出申请", "The application is made 30 working days before the licence expires"), 1.0, False),
        (("注销", "Cancellation"), ("注销申请书", "Cancellation request"),
         ("已停止相关经营活动并结清相关事项", "The activity has ceased and obligations are settled"), 0.5, True)],
    "registration": [
        (("新办", "New Application"), ("相关资格或权属证明", "Proof of the relevant qualification or title"),
         ("申请人此前未办理同类登记", "The applicant has not completed this registration before"), 1.0, False),
        (("变更", "Modification"), ("变更前后对照说明", "Comparison of the particulars before and after the change"),
         ("登记事项发生变化之日起30日内申请", "The application is made within 30 days of the change"), 0.5, True),
        (("注销", "Cancellation"), ("注销申请书及原登记证明", "Cancellation request and the original registration certificate"),
         ("已完成清算或不再具备登记条件", "Liquidation is complete or the registration conditions no longer hold"), 0.5, True)],
}
STATUTORY_DAYS = {"approval": (20, 20, 30, 45, 60), "licence": (15, 20, 20, 30), "registration": (5, 10, 15, 20)}
# Procedure steps: (name, text, kinds it applies to, probability).
STEPS = [
    ("申请|Application", "申请人通过明川省政务服务网或到政务服务中心窗口提交申请材料|The applicant submits the materials on the "
     "Mingchuan Government Service Portal or at the service centre window", "*", 1.0),
    ("受理|Acceptance", "窗口对材料进行审查，齐全且符合法定形式的予以受理，不全的一次性告知需补正内容|The window checks the materials; "
     "complete ones are accepted, otherwise everything to be supplemented is notified at once", "*", 1.0),
    ("审查|Review", "承办处室对申请材料进行实质审查并提出审查意见|The responsible division examines the substance and gives an opinion",
     "*", 1.0),
    ("现场核查|On-site inspection", "组织对申请人的场所、设施进行现场核查|The premises and facilities are inspected on site",
     "licence", 0.6),
    ("专家评审|Expert review", "组织专家进行技术评审，评审时间不计入办理时限|Experts review the application; review time is not "
     "counted in the time limit", "approval", 0.6),
    ("公示|Public notice", "对拟作出的决定进行公示，公示期5个工作日|The proposed decision is published for 5 working days",
     "approval registration", 0.3),
    ("决定|Decision", "作出准予或不予办理的决定，不予办理的书面说明理由|A decision is made; a refusal states its reasons in writing",
     "*", 1.0),
    ("送达|Delivery", "通过窗口领取、邮寄或电子证照方式送达办理结果|The result is collected at the window, posted, or issued "
     "as an electronic certificate", "*", 1.0),
]
ORG_OBJECTS = _p("企业法人|Enterprise legal persons", "事业单位法人|Public institution legal persons",
                 "社会组织法人|Social organisation legal persons", "其他组织|Other organisations")
HOURS = _p("工作日上午9:00-12:00，下午13:00-17:00（法定节假日除外）|Working days 9:00-12:00 and 13:00-17:00 (except public holidays)",
           "周一至周五8:30-12:00，14:00-17:30（夏季14:30-18:00）|Monday to Friday 8:30-12:00 and 14:00-17:30 (summer 14:30-18:00)",
           "工作日9:00-17:00（中午不休息），周六上午提供预约服务|Working days 9:00-17:00 (open at noon); Saturday mornings by appointment")
PORTAL = ("明川省政务服务网", "Mingchuan Government Service Portal")
ONLINE = _p(f"是（全程网办：{PORTAL[0]} {DEMO_DOMAIN}）|Yes (fully online: {PORTAL[1]}, {DEMO_DOMAIN})",
            f"是（{PORTAL[0]}网上申报，窗口领取结果）|Yes (apply online at the {PORTAL[1]}; collect the result at the window)",
            "否（需到窗口现场办理）|No (in person at the service window)")
_ZH_DIGITS = "零一二三四五六七八九"


def _zh_number(n: int) -> str:
    """1..99 in Chinese numerals (article numbers: 第十二条)."""
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else _ZH_DIGITS[tens] + "十")
    return head + (_ZH_DIGITS[ones] if ones else "") if n >= 10 else _ZH_DIGITS[n]


def _regions() -> list[dict[str, Any]]:
    """Every region with its names and service centre, in a fixed order (province, cities, districts)."""
    out = [dict(region=PROVINCE, prefix=("明川省", "Mingchuan Provincial"), level=0,
                centre=("明川省政务服务中心（青石市临江区世纪大道88号）",
                        "Mingchuan Provincial Government Service Centre (88 Century Avenue, Linjiang District, Qingshi City)"))]
    cities = [(tuple(c.split("|")), d) for c, d in CITIES.items()]
    for ci, (city, _) in enumerate(cities):
        st = STREETS[ci % len(STREETS)]
        out.append(dict(region=(PROVINCE[0] + city[0], f"{city[1]}, {PROVINCE[1]}"),
                        prefix=(city[0], city[1].replace(" City", " Municipal")), level=1,
                        centre=(f"{city[0]}政务服务中心（{city[0]}{st[0]}{20 + 7 * ci}号）",
                                f"{city[1]} Government Service Centre ({20 + 7 * ci} {st[1]}, {city[1]})")))
    for ci, (city, districts) in enumerate(cities):
        for di, dist in enumerate(districts):
            st = STREETS[(ci + di + 3) % len(STREETS)]
            out.append(dict(region=(PROVINCE[0] + city[0] + dist[0], f"{dist[1]}, {city[1]}, {PROVINCE[1]}"),
                            prefix=(city[0] + dist[0], dist[1]), level=2,
                            centre=(f"{city[0]}{dist[0]}政务服务中心（{dist[0]}{st[0]}{5 + 11 * di}号）",
                                    f"{dist[1]} Government Service Centre ({5 + 11 * di} {st[1]}, {dist[1]})")))
    return out


REGIONS = _regions()
REGION_WEIGHTS = [8.0 if r["level"] == 0 else 2.0 if r["level"] == 1 else 0.6 for r in REGIONS]
SERVICES = [(si, (tpl.split("|")[0].replace("{x}", x[0]), tpl.split("|")[1].replace("{x}", x[1])), kind, person)
            for si, sec in enumerate(SECTORS) for tpl, kind, person, fillers in sec["services"] for x in fillers]


def demo_capacity() -> int:
    """How many items (and families) the generator can place: distinct (region, service) pairs."""
    return len(REGIONS) * len(SERVICES)


def _unit_sizes(n_items: int, family_share: float, rng: random.Random) -> list[int]:
    """Sizes of the units (1 = a singleton, >= 2 = a family) summing to n_items, in shuffled order."""
    remaining = round(n_items * family_share)
    sizes: list[int] = []
    while remaining >= 2:
        s = min(rng.choice((2, 3, 3, 3, 4)), remaining)
        if remaining - s == 1:  # never leave a lone family slot: grow or shrink this family
            s = s + 1 if s < 4 else s - 1
        sizes.append(s)
        remaining -= s
    sizes += [1] * (n_items - sum(sizes))
    rng.shuffle(sizes)
    return sizes


def _pick_materials(rng: random.Random, pool: list[tuple[str, str]], k: int) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    return [(m, rng.choice(FORMS)) for m in rng.sample(pool, k)]


def _unit(rng: random.Random, ri: int, svc: int, size: int) -> list[dict[str, Any]]:
    """The language-neutral choices of one item (size 1) or one family (base item + variants)."""
    si, name, kind, person = SERVICES[svc]
    sec = SECTORS[si]
    stat = rng.choice(STATUTORY_DAYS[kind])
    immediate = stat <= 10 and rng.random() < 0.3
    pool = PERSON_MATERIALS if person else ORG_MATERIALS
    laws = [(law, sorted(rng.sample(range(2, 61), rng.choice((1, 1, 2))))) for law in
            rng.sample(sec["laws"], rng.choice((1, 2)))]
    if kind != "registration" and rng.random() < 0.5:
        laws.append((("中华人民共和国行政许可法", "Administrative Licensing Law of the PRC"), [rng.randint(12, 57)]))
    base = dict(
        si=si, ri=ri, name=name, kind=kind, variant=("", ""), stat=stat, immediate=immediate,
        committed=1 if immediate else rng.randint(max(1, stat // 5), max(1, stat * 3 // 5)),
        requirements=rng.sample(REQUIREMENTS[kind], rng.choice((2, 3))), laws=laws,
        objects=[("自然人", "Natural persons")] if person else rng.sample(ORG_OBJECTS, rng.choice((1, 1, 2))),
        online=rng.choices(ONLINE, weights=(65, 20, 15))[0],
        fee=None if rng.random() < 0.8 else rng.choice((10, 20, 50, 100, 200)),
        steps=[s for s in STEPS if s[2] == "*" or (kind in s[2].split() and rng.random() < s[3])],
        materials=[(pool[0], rng.choice(FORMS))] + _pick_materials(rng, pool[1:], rng.randint(1, 3))
        + _pick_materials(rng, sec["materials"], rng.randint(1, 3)),
    )
    members = [base]
    for vi in sorted(rng.sample(range(len(VARIANTS[kind])), size - 1)):
        vname, material, requirement, factor, free = VARIANTS[kind][vi]
        stat_v = max(2, round(stat * factor))
        mats = list(base["materials"])
        if len(mats) > 3:  # a variant needs fewer of the base documents
            del mats[rng.randrange(1, len(mats))]
        members.append(dict(
            base, name=(f"{name[0]}（{vname[0]}）", f"{name[1]} ({vname[1]})"), variant=vname, stat=stat_v,
            committed=1 if immediate else rng.randint(max(1, stat_v // 5), max(1, stat_v * 3 // 5)),
            requirements=base["requirements"] + [requirement], fee=None if free else base["fee"],
            materials=mats + [(material, rng.choice(FORMS))],
        ))
    return members


def _localise(m: dict[str, Any], li: int, doc_id: str) -> dict[str, str]:
    """One item's 18 fields in one language (li: 0 zh, 1 en)."""
    zh = li == 0
    si, ri = m["si"], m["ri"]
    region, agency = REGIONS[ri], SECTORS[si]["agency"][0 if REGIONS[ri]["level"] == 0 else 1]
    phone = f"0000-{6_000_000 + ((ri * 31 + si) * 7919) % 3_999_999:07d}"
    floor, zone, window = 1 + si % 4, "ABCD"[(si // 4) % 4], 1 + (si * 7 + ri) % 30
    sep, end = ("；", "。") if zh else ("; ", ".")

    def days(n: int) -> str:
        return f"{n}个工作日" if zh else f"{n} working day{'s' if n > 1 else ''}"

    def cite(law: tuple[str, str], arts: list[int]) -> str:
        if zh:
            return f"《{law[0]}》" + "、".join(f"第{_zh_number(a)}条" for a in arts)
        return f"{law[1]}, Article {arts[0]}" if len(arts) == 1 else f"{law[1]}, Articles {arts[0]} and {arts[1]}"

    fee = m["fee"]
    return {
        "region": region["region"][li],
        "publication_address": f"{DEMO_DOMAIN}/bszn/{doc_id}.html",
        "item_name": m["name"][li],
        "handling_agency": region["prefix"][li] + ("" if zh else " ") + agency[li],
        "department": agency[li],
        "consultation_method": f"咨询电话：{phone}（工作日）；网上咨询：{PORTAL[0]}“我要咨询”栏目" if zh
        else f"Phone: {phone} (working days); online: the 'Ask Us' section of the {PORTAL[1]}",
        "requirements": sep.join(r[li] for r in m["requirements"]) + end,
        "legal_basis": sep.join(cite(law, arts) for law, arts in m["laws"]),
        "statutory_time_limit": days(m["stat"]),
        "committed_time_limit": days(m["committed"]),
        "service_object": ("、" if zh else ", ").join(o[li] for o in m["objects"]),
        "processing_type": ("即办件", "Immediate item")[li] if m["immediate"] else ("承诺件", "Commitment item")[li],
        "online_handling": m["online"][li],
        "processing_time": HOURS[ri % len(HOURS)][li],
        "processing_location": f"{region['centre'][0]}{floor}楼{zone}区{window}号窗口" if zh
        else f"{region['centre'][1]}, Floor {floor}, Zone {zone}, Window {window}",
        "fee_standard": ("不收费", "Free of charge")[li] if fee is None
        else (f"{fee}元/件（按明川省发展和改革委员会、明川省财政厅核定的标准收取）" if zh else
              f"CNY {fee} per application (schedule approved by the Mingchuan Provincial Development and Reform "
              "Commission and Department of Finance)"),
        "procedure": "\n".join(f"{i}. {s[0].split('|')[li]}{'：' if zh else ': '}{s[1].split('|')[li]}{end}"
                               for i, s in enumerate(m["steps"], 1)),
        "application_materials": "\n".join(f"{i}. {name[li]}{form[li]}" for i, (name, form) in enumerate(m["materials"], 1)),
    }


def generate_demo_corpus(n_items: int = 300, lang: str = "zh", family_share: float = 0.33, seed: int = 0) -> pd.DataFrame:
    """Generate a SYNTHETIC knowledge base of government service guides (fictional province).

    Args:
        n_items: number of items (documents); the paper's province-level corpus has 6,111.
            At most `demo_capacity()` when no item is in a family.
        lang: "zh" or "en"; one seed gives the same corpus in both languages.
        family_share: target share of items that belong to a near-duplicate family.
        seed: random seed; the output is identical for identical arguments.

    Returns:
        One row per item: `doc_id` ("D00001"...), the 18 `CORPUS_FIELDS`, `family_id` ("F0001",
        "" outside families), `variant` ("" for singletons and family bases), `synthetic` (True)
        and `text` (the rendered document).

    Raises:
        ValueError: an unknown language, a share outside [0, 1], or more items than the
            fictional province's (region, service) pairs can hold.
    """
    # Imported here: cube.corpus imports this module lazily (build_corpus), and so do we.
    from cube.corpus import CORPUS_COLUMNS, render_document

    if lang not in _L:
        raise ValueError(f"demo corpus: lang must be one of {sorted(_L)}, got {lang!r}")
    if n_items < 1 or not 0.0 <= family_share <= 1.0:
        raise ValueError(f"demo corpus: need n_items >= 1 and 0 <= family_share <= 1, got {n_items}, {family_share}")
    rng = random.Random(seed)
    sizes = _unit_sizes(n_items, family_share, rng)
    if len(sizes) > demo_capacity():
        raise ValueError(f"demo corpus: {n_items} items with family_share={family_share} need {len(sizes)} distinct "
                         f"(region, service) pairs; the generator has {demo_capacity()} (raise family_share or lower n_items)")
    li = _L[lang]
    queues: dict[int, list[int]] = {}
    available = list(range(len(REGIONS)))
    rows: list[dict[str, Any]] = []
    n_families = 0
    for size in sizes:
        # A region is drawn by weight among those with services left; each region offers each service once.
        ri = rng.choices(available, weights=[REGION_WEIGHTS[i] for i in available])[0]
        if ri not in queues:
            queues[ri] = list(range(len(SERVICES)))
            rng.shuffle(queues[ri])
        svc = queues[ri].pop()
        if not queues[ri]:
            available.remove(ri)
        n_families += size > 1
        family_id = f"F{n_families:04d}" if size > 1 else ""
        for m in _unit(rng, ri, svc, size):
            doc_id = f"D{len(rows) + 1:05d}"
            row = {"doc_id": doc_id, **_localise(m, li, doc_id)}
            row.update(family_id=family_id, variant=m["variant"][li], synthetic=True)
            row["text"] = render_document(row, lang)
            rows.append(row)
    return pd.DataFrame(rows, columns=list(CORPUS_COLUMNS))
